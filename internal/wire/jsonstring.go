package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// jsonSafe[c] reports whether the ASCII byte c goes into a JSON string as itself; jsonHTMLSafe
// also leaves out <, > and &, which HTML-safe JSON escapes.
var jsonSafe, jsonHTMLSafe = func() (t, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
		h[c] = t[c] && c != '<' && c != '>' && c != '&'
	}
	return t, h
}()

// AppendJSONString appends s, valid UTF-8, as a JSON string exactly as encoding/json writes it:
// with html, as json.Marshal does (<, > and & escaped); without, as an Encoder with
// SetEscapeHTML(false) does. U+2028 and U+2029 are escaped either way, and an invalid byte
// becomes \ufffd, as encoding/json does. Renderers of output use it to write an event's text
// without reflection, the wire unchanged.
func AppendJSONString(b, s []byte, html bool) []byte {
	safe := &jsonSafe
	if html {
		safe = &jsonHTMLSafe
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while all go in as themselves: most output is plain text.
		for i+8 <= len(s) && plain8(binary.LittleEndian.Uint64(s[i:]), html) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// Eight-byte words for plain8: each byte of lsb is 0x01, of msb 0x80; rep(c) has c in each.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

func rep(c byte) uint64 { return lsb * uint64(c) }

// plain8 reports whether the eight bytes of v all go into a JSON string as themselves: ASCII
// at or above space, not '"' or '\\' (nor <, > or & with html). A byte is flagged by the
// classic "has a zero byte" test, (x - lsb) &^ x & msb, on v xor the byte looked for; below
// space by the same test on v with its high bits cleared.
func plain8(v uint64, html bool) bool {
	if v&msb != 0 {
		return false // a byte outside ASCII
	}
	low := (v - rep(0x20)) &^ v // a byte below space (v has no high bits set)
	has := func(c byte) uint64 { x := v ^ rep(c); return (x - lsb) &^ x }
	bad := low | has('"') | has('\\')
	if html {
		bad |= has('<') | has('>') | has('&')
	}
	return bad&msb == 0
}
