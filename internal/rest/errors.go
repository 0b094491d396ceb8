package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Code is the machine-readable kind of a REST error, in the JSON body's error.code.
type Code string

// The error codes, each with its one HTTP status (see status).
const (
	CodeBadRequest   Code = "bad_request"
	CodeUnauthorized Code = "unauthorized"
	CodeForbidden    Code = "forbidden"
	CodeNotFound     Code = "not_found"
	CodeMethod       Code = "method_not_allowed"
	CodeConflict     Code = "conflict"
	CodeTooLarge     Code = "too_large"
	CodeLimit        Code = "limit"
	CodeUnavailable  Code = "unavailable"
	CodeInternal     Code = "internal"
)

var statuses = map[Code]int{
	CodeBadRequest:   http.StatusBadRequest,
	CodeUnauthorized: http.StatusUnauthorized,
	CodeForbidden:    http.StatusForbidden,
	CodeNotFound:     http.StatusNotFound,
	CodeMethod:       http.StatusMethodNotAllowed,
	CodeConflict:     http.StatusConflict,
	CodeTooLarge:     http.StatusRequestEntityTooLarge,
	CodeLimit:        http.StatusTooManyRequests,
	CodeUnavailable:  http.StatusServiceUnavailable,
	CodeInternal:     http.StatusInternalServerError,
}

// apiError is an error on its way to the client: a code, a sentence for a person, and the
// technical cause.
type apiError struct {
	code    Code
	message string
	detail  string
}

func (e *apiError) Error() string { return e.message + ": " + e.detail }

func newError(code Code, message string, cause error) *apiError {
	e := &apiError{code: code, message: message}
	if cause != nil {
		e.detail = cause.Error()
	}
	return e
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error struct {
		Code    Code   `json:"code"`
		Message string `json:"message"`
		Detail  string `json:"detail,omitempty"`
	} `json:"error"`
}

// classify maps an error from the domain packages to its REST form. Errors it does not know
// are internal: the client gets a generic sentence, the log gets the cause.
func classify(err error) *apiError {
	var ae *apiError
	var tooLarge *http.MaxBytesError
	var limit *stream.LimitError
	var bgLimit *process.LimitError
	var died *sandbox.DiedError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &tooLarge):
		return newError(CodeTooLarge, "The request body is too large.", err)
	case errors.Is(err, auth.ErrNoToken):
		return newError(CodeUnauthorized, "This request needs a token: send 'Authorization: Bearer <token>'.", err)
	case errors.Is(err, auth.ErrUnknownToken):
		return newError(CodeUnauthorized, "The token is not one hangar knows.", err)
	case errors.Is(err, auth.ErrRevoked):
		return newError(CodeUnauthorized, "The token was revoked.", err)
	case errors.Is(err, auth.ErrExpired):
		return newError(CodeUnauthorized, "The token has expired.", err)
	case errors.Is(err, auth.ErrForbidden):
		return newError(CodeForbidden, "The token is not allowed to do that.", err)
	case errors.Is(err, auth.ErrInvalid):
		return newError(CodeBadRequest, "The token request is not valid.", err)
	case errors.Is(err, auth.ErrNotFound):
		return newError(CodeNotFound, "There is no such token.", err)
	case errors.Is(err, auth.ErrNoSandbox):
		return newError(CodeNotFound, "There is no such sandbox, or it is not yours.", err)
	case errors.Is(err, auth.ErrStatic):
		return newError(CodeConflict, "That token comes from the tokens file and can only be changed there.", err)
	case errors.As(err, &limit):
		return newError(CodeLimit, "Too many streams are open; close one or try again shortly.", err)
	case errors.Is(err, stream.ErrShuttingDown):
		return newError(CodeUnavailable, "hangar is shutting down; try again in a moment.", err)
	case errors.As(err, &bgLimit):
		return newError(CodeLimit, "Too many background processes are running for this token.", err)
	case errors.Is(err, process.ErrNotFound):
		return newError(CodeNotFound, "There is no such process, or it is not this token's.", err)
	case errors.Is(err, process.ErrExited):
		return newError(CodeConflict, "The process has exited.", err)
	case errors.Is(err, process.ErrNeedsDaemon):
		return newError(CodeConflict, "This needs the sandbox's daemon, which it does not have.", err)
	case errors.Is(err, process.ErrInvalid):
		return newError(CodeBadRequest, "The process request is not valid.", err)
	case errors.Is(err, sandbox.ErrNotFound):
		return newError(CodeNotFound, "There is no such sandbox, or it is not yours.", err)
	case errors.Is(err, sandbox.ErrConflict):
		return newError(CodeConflict, "That sandbox name is taken.", err)
	case errors.Is(err, provider.ErrImageMissing):
		return newError(CodeBadRequest, imageMissing(err), err)
	case errors.Is(err, sandbox.ErrInvalid):
		return newError(CodeBadRequest, "The sandbox request is not valid.", err)
	case errors.Is(err, sandbox.ErrForbidden):
		return newError(CodeForbidden, "The token is not allowed to do that.", err)
	case errors.Is(err, sandbox.ErrState):
		return newError(CodeConflict, "The sandbox is not in a state that allows this.", err)
	case errors.As(err, &died):
		return newError(CodeUnavailable, died.Message(), nil) // the cause (an address) stays in the log
	case errors.Is(err, sandbox.ErrUnavailable):
		return newError(CodeUnavailable, "The sandbox's provider or daemon does not answer.", err)
	default:
		return newError(CodeInternal, "Something went wrong inside hangar; the server log has the details.", err)
	}
}

// processRetryAfter is the Retry-After of a refused background process: a place frees only when
// one of the token's processes ends, which hangar cannot foresee, so it is a polling hint.
const processRetryAfter = 10 * time.Second

// writeError sends err as a JSON error response.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// Nobody is left to answer: not hangar's failure.
		a.log.Debug("the client went away", "method", r.Method, "path", r.URL.Path)
		return
	}
	e := classify(err)
	status := statuses[e.code]
	if e.code == CodeInternal {
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = &apiError{code: e.code, message: e.message} // the cause stays in the log
	}
	var limit *stream.LimitError
	var bgLimit *process.LimitError
	switch {
	case errors.As(err, &limit):
		w.Header().Set("Retry-After", strconv.Itoa(int(limit.RetryAfter.Seconds())))
	case errors.As(err, &bgLimit):
		w.Header().Set("Retry-After", strconv.Itoa(int(processRetryAfter.Seconds())))
	}
	if e.code == CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hangar"`)
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Detail = e.code, e.message, e.detail
	writeJSON(w, status, body)
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
