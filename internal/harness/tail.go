package harness

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// StderrTailBytes bounds the tail of the agent's stderr that the status file keeps: enough for
// the few lines an agent prints when it gives up ("Not inside a trusted directory ..."), small
// enough for every turn's status and turn.finished.
const StderrTailBytes = 4 << 10

// tailWriter keeps the last StderrTailBytes (and a little more, to find a line's start) of what
// goes through it, passing everything on to out. One goroutine writes; String is called after.
type tailWriter struct {
	out  io.Writer // nil: nothing passed on
	buf  []byte
	lost bool // bytes before buf were dropped
}

func (t *tailWriter) Write(p []byte) (int, error) {
	if t.out != nil {
		// The agent's stderr still goes where it went; a failure there does not end the tail.
		t.out.Write(p)
	}
	const keep = 2 * StderrTailBytes
	t.buf = append(t.buf, p...)
	if len(t.buf) > keep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-StderrTailBytes-utf8.UTFMax:]...)
		t.lost = true
	}
	return len(p), nil
}

// String is the tail: at most StderrTailBytes, starting at a line's start when a line starts
// within it, valid UTF-8 (a byte that is not becomes U+FFFD), without trailing blank space.
func (t *tailWriter) String() string {
	b := t.buf
	cut := len(b) > StderrTailBytes
	if cut {
		b = b[len(b)-StderrTailBytes:]
	}
	if cut || t.lost {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		} else {
			for len(b) > 0 && !utf8.RuneStart(b[0]) {
				b = b[1:]
			}
		}
	}
	return strings.TrimRight(strings.ToValidUTF8(string(b), "\uFFFD"), " \t\r\n")
}
