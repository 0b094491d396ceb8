package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// decodeJSON reads a request body into v. It refuses, with a 400 that says which: a body that is
// not valid UTF-8 (encoding/json would quietly turn each bad byte into U+FFFD and run the
// command it mangled; bytes that are not text go base64 where an endpoint takes them), unknown
// fields, and anything but white space after the one JSON value (`{...}}` included: the
// decoder's More reports false for a stray closing bracket). Bodies over the cap (which the
// body middleware set) are a 413.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return newError(CodeBadRequest, "The request body could not be read.", err)
	}
	if !utf8.Valid(body) {
		return newError(CodeBadRequest, `The request body is not valid UTF-8; send bytes that are not text base64-encoded where the endpoint takes them (a process's input: "base64": true).`,
			fmt.Errorf("invalid UTF-8 at byte %d", invalidUTF8At(body)))
	}
	if at := loneSurrogateAt(body); at >= 0 {
		return newError(CodeBadRequest, `The request body has a \u escape that is half of a UTF-16 surrogate pair, which is no character; send the whole pair, or base64 where the endpoint takes it.`,
			fmt.Errorf("lone surrogate escape at byte %d", at))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newError(CodeBadRequest, "The request body is not the JSON this endpoint takes.", err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return newError(CodeBadRequest, "The request body has something after its JSON value; send exactly one JSON object.",
			fmt.Errorf("%d bytes after the value, which ends at byte %d", len(rest), dec.InputOffset()))
	}
	return nil
}

// loneSurrogateAt is the offset of the first \u escape in a JSON string of body that is half of
// a surrogate pair without its other half (encoding/json turns it into U+FFFD, as it does
// invalid UTF-8), or -1. body is valid UTF-8; its JSON syntax is the decoder's to check.
func loneSurrogateAt(body []byte) int {
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

// invalidUTF8At is the offset of the first byte of b that is not part of valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
