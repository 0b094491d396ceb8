package harness

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTailWriter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		writes []string
		check  func(tail string) bool
	}{
		{"short, as written", []string{"warning: a\n", "error: b\n\n"}, func(s string) bool { return s == "warning: a\nerror: b" }},
		{"from a line's start", []string{strings.Repeat("line of ten\n", 1000), "last"},
			func(s string) bool {
				return strings.HasPrefix(s, "line of ten\n") && strings.HasSuffix(s, "\nlast") && len(s) <= StderrTailBytes
			}},
		{"one long line: whole characters", []string{strings.Repeat("é", 5000)},
			func(s string) bool {
				return utf8.ValidString(s) && strings.HasPrefix(s, "é") && len(s) <= StderrTailBytes && len(s) >= StderrTailBytes-1
			}},
		{"not UTF-8", []string{"bad \xff byte"}, func(s string) bool { return s == "bad \uFFFD byte" }},
		{"many small writes", strings.Split(strings.Repeat("x", 20000)+"\nend", ""),
			func(s string) bool { return s == "end" || (strings.HasSuffix(s, "\nend") && len(s) <= StderrTailBytes) }},
	}
	for _, c := range cases {
		var out bytes.Buffer
		w := &tailWriter{out: &out}
		for _, s := range c.writes {
			w.Write([]byte(s))
		}
		if got := w.String(); !c.check(got) {
			t.Errorf("%s: tail (%d bytes) %.80q…%.40q", c.name, len(got), got, got[max(0, len(got)-40):])
		}
		if out.String() != strings.Join(c.writes, "") {
			t.Errorf("%s: %d bytes passed on, want all %d", c.name, out.Len(), len(strings.Join(c.writes, "")))
		}
	}
}
