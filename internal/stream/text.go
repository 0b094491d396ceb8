package stream

import "unicode/utf8"

// Runes carries an incomplete UTF-8 character at the end of one chunk of output over to the
// next, so that text printed by a command stays text whatever the sizes of the reads that
// brought it: a pipe read may end inside a character, and a chunk that does is no longer valid
// UTF-8 (a transport would send it base64). Bytes that are not UTF-8 pass through as they are;
// at most utf8.UTFMax-1 bytes wait for the next chunk, and Flush returns them at the end. The
// zero value is ready to use; it is not safe for concurrent use (one per output stream).
type Runes struct {
	held []byte
}

// Cut returns what can be sent now of the held bytes followed by data: all of it but an
// incomplete character at its end, which is kept for the next Cut or Flush. The result may
// share data's memory.
func (r *Runes) Cut(data []byte) []byte {
	if len(r.held) > 0 {
		data = append(r.held, data...)
		r.held = nil
	}
	n := completeLen(data)
	if n < len(data) {
		r.held = append([]byte(nil), data[n:]...)
	}
	return data[:n]
}

// Flush returns the bytes held back (an incomplete character the output ended with) and
// forgets them.
func (r *Runes) Flush() []byte {
	held := r.held
	r.held = nil
	return held
}

// completeLen is the length of b without an incomplete character at its end: one whose first
// byte is among the last utf8.UTFMax-1 bytes, which could still become valid UTF-8 with the
// bytes that follow. Anything else (complete characters, bytes that are not UTF-8) is kept.
func completeLen(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// WholeRunes wraps out, a command's output by stream name ("stdout", "stderr"), so that each
// stream's chunks end on whole characters (see Runes); flush passes on what is held at the end.
// Call flush once, after the last output, from the goroutine that calls the wrapper.
func WholeRunes(out func(name string, data []byte)) (wrapped func(name string, data []byte), flush func()) {
	// A command has two streams, so a list found by a look at each beats a map: the wrapper
	// runs once for every chunk a client waits for.
	type carried struct {
		name string
		r    Runes
	}
	var carry []*carried // in order of first output, so flush is deterministic
	wrapped = func(name string, data []byte) {
		var c *carried
		for _, k := range carry {
			if k.name == name {
				c = k
				break
			}
		}
		if c == nil {
			c = &carried{name: name}
			carry = append(carry, c)
		}
		if d := c.r.Cut(data); len(d) > 0 {
			out(name, d)
		}
	}
	flush = func() {
		for _, c := range carry {
			if d := c.r.Flush(); len(d) > 0 {
				out(c.name, d)
			}
		}
	}
	return wrapped, flush
}
