package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Code is the machine-readable kind of a REST error, in the JSON body's error.code: the
// problem table's.
type Code = problem.Code

// The codes used by this package's own checks.
const (
	CodeBadRequest  = problem.CodeBadRequest
	CodeForbidden   = problem.CodeForbidden
	CodeNotFound    = problem.CodeNotFound
	CodeMethod      = problem.CodeMethod
	CodeTooLarge    = problem.CodeTooLarge
	CodeUnavailable = problem.CodeUnavailable
	CodeInternal    = problem.CodeInternal
)

// newError is a problem this package finds itself (a malformed request).
func newError(code Code, message string, cause error) *problem.Problem {
	return problem.New(code, message, cause)
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error struct {
		Code    Code   `json:"code"`
		Message string `json:"message"`
		Detail  string `json:"detail,omitempty"`
	} `json:"error"`
}

// classify is err in a client's terms (the problem table), with an internal failure's cause
// logged and kept from the client.
func (a *api) classify(r *http.Request, err error) *problem.Problem {
	e := problem.Of(err)
	if e.Code == CodeInternal {
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = &problem.Problem{Code: e.Code, Message: e.Message} // the cause stays in the log
	}
	if e.Code == problem.CodeUnavailable && e.Detail == "" {
		a.log.Warn("request refused: a part hangar needs does not answer", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return e
}

// writeError sends err as a JSON error response.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// Nobody is left to answer: not hangar's failure.
		a.log.Debug("the client went away", "method", r.Method, "path", r.URL.Path)
		return
	}
	var unstarted *process.UnstartedError
	if forward.Forwarded(r) && errors.Is(err, stream.ErrShuttingDown) && (r.Method == http.MethodGet || r.Method == http.MethodHead || errors.As(err, &unstarted)) {
		// This replica began to shut down after it took the request (its sandboxes are being
		// handed over): the replica that forwarded it asks the new owner, rather than pass a
		// 503 on. Only a read, or a process start refused before it began: anything else may
		// have done part of its work.
		w.Header().Set(forward.MovedHeader, "shutting down")
	}
	var elsewhere *process.ElsewhereError
	if forward.Forwarded(r) && errors.As(err, &elsewhere) {
		// The sandbox was handed over after the replica that forwarded the request asked where
		// it was (nothing was done here): it asks again.
		w.Header().Set(forward.MovedHeader, "moved")
	}
	e := a.classify(r, err)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds())))
	}
	if e.Code == problem.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hangar"`)
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Detail = e.Code, e.Message, e.Detail
	writeJSON(w, e.Code.Status(), body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
