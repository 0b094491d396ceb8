package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/hangar-dev/hangar/internal/jsoncheck"
	"github.com/hangar-dev/hangar/internal/problem"
)

// decodeJSON reads a request body into v (a pointer to a struct). It refuses, with a 400 that
// says which: no body (naming v's fields, where the decoder would say "EOF"), a body that is not
// valid UTF-8 (encoding/json would quietly turn each bad byte into U+FFFD and run the
// command it mangled; bytes that are not text go base64 where an endpoint takes them), unknown
// fields, and anything but white space after the one JSON value (`{...}}` included: the
// decoder's More reports false for a stray closing bracket). Bodies over the cap (which the
// body middleware set) are a 413, bodies too slow to arrive (bodyDeadline) a 408.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) || errors.Is(err, problem.ErrBodyTimeout) {
			return err
		}
		return newError(CodeBadRequest, "The request body could not be read.", err)
	}
	if at := jsoncheck.InvalidUTF8At(body); at >= 0 {
		return newError(CodeBadRequest, `The request body is not valid UTF-8; send bytes that are not text base64-encoded where the endpoint takes them (a process's input: "base64": true).`,
			fmt.Errorf("invalid UTF-8 at byte %d", at))
	}
	if at := jsoncheck.LoneSurrogateAt(body); at >= 0 {
		return newError(CodeBadRequest, `The request body has a \u escape that is half of a UTF-16 surrogate pair, which is no character; send the whole pair, or base64 where the endpoint takes it.`,
			fmt.Errorf("lone surrogate escape at byte %d", at))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return newError(CodeBadRequest, "The request has no body: send a JSON object with the fields this endpoint takes ("+
			strings.Join(jsonFields(reflect.TypeOf(v).Elem()), ", ")+").", nil)
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

// jsonFields are the names struct type t has in JSON, those of embedded structs in place.
func jsonFields(t reflect.Type) []string {
	var names []string
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
