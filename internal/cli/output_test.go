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

// TestTailStart: where the last n lines of kept output start, a last line without its newline
// counting as one.
func TestTailStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data string
		n    int
		want string
	}{
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 4, "a\nb\nc\n"},
		{"a\nb", 1, "b"},
		{"a\n\n", 1, "\n"},
		{"", 1, ""},
	} {
		if got := c.data[tailStart([]byte(c.data), c.n):]; got != c.want {
			t.Errorf("the last %d lines of %q = %q, want %q", c.n, c.data, got, c.want)
		}
	}
}
