package cli

import (
	"strings"
	"testing"
)

// TestTableColour: a coloured cell takes its printed width, so the columns after it line up
// with those of rows whose cells are plain.
func TestTableColour(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tb := newTable(&b, "NAME", "STATE", "SANDBOX")
	tb.row("a", paint(true, "32", "running"), "box")
	tb.row("bb", "paused", "box2")
	tb.row("c", paint(true, "90", "idle"), "")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "NAME  STATE    SANDBOX\n" +
		"a     \x1b[32mrunning\x1b[0m  box\n" +
		"bb    paused   box2\n" +
		"c     \x1b[90midle\x1b[0m\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%q\nwant\n%q", got, want)
	}
}
