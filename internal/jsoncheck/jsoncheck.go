// Package jsoncheck finds what in a JSON body encoding/json would quietly change instead of
// refusing: bytes that are not UTF-8 and \u escapes that are half of a UTF-16 surrogate pair,
// each of which it decodes as U+FFFD. The transports refuse such a body, so that a command, a
// file's content or a process's input is never run or written other than it was sent.
package jsoncheck

import "unicode/utf8"

// LoneSurrogateAt is the offset of the first \u escape in a JSON string of body that is half of
// a surrogate pair without its other half (encoding/json turns it into U+FFFD, as it does
// invalid UTF-8), or -1. body is valid UTF-8; its JSON syntax is the decoder's to check.
func LoneSurrogateAt(body []byte) int {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			if body[i+1] != 'u' {
				i++ // an escaped character: \" or \\ among them
				continue
			}
			r, ok := hex4(body[i+2:])
			switch {
			case !ok:
				continue // malformed: the decoder says so
			case r >= 0xD800 && r < 0xDC00: // high: a low one must follow
				if low, ok := hex4(body[min(i+8, len(body)):]); ok && i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' && low >= 0xDC00 && low < 0xE000 {
					i += 11
					continue
				}
				return i
			case r >= 0xDC00 && r < 0xE000: // low without a high one before it
				return i
			}
			i += 5
		}
	}
	return -1
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// InvalidUTF8At is the offset of the first byte of b that is not part of valid UTF-8, or -1.
func InvalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}
