package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/jsoncheck"
	"github.com/hangar-dev/hangar/internal/problem"
)

// HTTP-level failures on /mcp (before any tool runs) are answered in JSON, as JSON-RPC error
// responses with a null id: {"jsonrpc":"2.0","id":null,"error":{"code":…,"message":…,"data":
// {"detail":…}}}. message is a sentence for a person; detail, when there is one, is the
// SDK's or the bearer-token check's own text. The HTTP status is kept (401 keeps its
// WWW-Authenticate: Bearer), and go-sdk clients surface the message.
const (
	codeParseError      = -32700 // the body is not JSON
	codeInvalidRequest  = -32600 // 400, 404 (unknown session), 405, 413, 415
	codeUnauthorized    = -32001 // 401, 403: no valid token with the mcp scope, or not its session
	codeTooManySessions = -32029 // 429: HANGAR_MCP_SESSIONS_PER_TOKEN
	codeInternal        = -32603 // 5xx
)

// maxBody is the default cap on a request body: the SDK's own (DefaultMaxRequestBodyBytes).
const maxBody = 4 << 20

// writeError writes an HTTP-level failure as a JSON-RPC error response.
func writeError(w http.ResponseWriter, status, code int, message, detail string) {
	e := map[string]any{"code": code, "message": message}
	if detail != "" {
		e["data"] = map[string]string{"detail": detail}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeProblem writes a domain error that refused a request before the SDK saw it (a limit,
// a shutdown) as a JSON-RPC error response: the problem table's sentence, its status (429, 503)
// and Retry-After, the JSON-RPC code its resources use; anything else is an internal error.
func writeProblem(w http.ResponseWriter, err error) {
	p := problem.Of(err)
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(p.RetryAfter.Round(time.Second).Seconds()))))
	}
	switch p.Code {
	case problem.CodeLimit:
		writeError(w, http.StatusTooManyRequests, codeResourceLimit, p.Message, "")
	case problem.CodeUnavailable:
		writeError(w, http.StatusServiceUnavailable, codeResourceUnavailable, p.Message, "")
	default:
		code, message := errorFor(http.StatusInternalServerError)
		writeError(w, http.StatusInternalServerError, code, message, "")
	}
}

// errorFor is the code and sentence for an HTTP error status the SDK or the bearer-token
// check answered with plain text.
func errorFor(status int) (code int, message string) {
	switch status {
	case http.StatusUnauthorized:
		return codeUnauthorized, "This request needs a valid bearer token with the mcp scope (Authorization: Bearer <token>)."
	case http.StatusForbidden:
		return codeUnauthorized, "This request is refused: the session belongs to another token, or the Host header is not allowed."
	case http.StatusNotFound:
		return codeInvalidRequest, "There is no such MCP session: it was ended, it was idle longer than HANGAR_MCP_SESSION_IDLE_SECONDS, " +
			"or its token was revoked. Initialize a new session."
	case http.StatusMethodNotAllowed:
		return codeInvalidRequest, "/mcp does not take that HTTP method."
	case http.StatusRequestEntityTooLarge:
		return codeInvalidRequest, "The request body is too large."
	case http.StatusUnsupportedMediaType:
		return codeInvalidRequest, "The request body must be JSON (Content-Type: application/json)."
	}
	if status >= 500 {
		return codeInternal, "Something went wrong inside hangar; the server log has the details."
	}
	return codeInvalidRequest, "The MCP request is not valid."
}

// jsonErrors is the response writer in front of everything /mcp answers: a plain-text error
// (http.Error, which the SDK and the bearer-token middleware use) is held back and written by
// finish as JSON instead. Everything else passes through untouched.
type jsonErrors struct {
	w           http.ResponseWriter
	metadataURL string       // the protected resource metadata's URL, for WWW-Authenticate; "": none
	hadToken    bool         // the request carried an Authorization header
	status      int          // the status of a plain-text error being rewritten; 0: passing through
	text        bytes.Buffer // that error's text, its first 1 KiB
	verifyErr   error        // the token check's failure that was not the token's fault, if any
}

func (j *jsonErrors) Header() http.Header { return j.w.Header() }

func (j *jsonErrors) WriteHeader(code int) {
	if j.status == 0 && code >= 400 && strings.HasPrefix(j.w.Header().Get("Content-Type"), "text/plain") {
		j.status = code
		return
	}
	j.w.WriteHeader(code)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if j.status != 0 {
		j.text.Write(b[:min(len(b), max(0, 1024-j.text.Len()))])
		return len(b), nil
	}
	return j.w.Write(b)
}

// FlushError flushes, except an error being held back: that is written whole by finish.
func (j *jsonErrors) FlushError() error {
	if j.status != 0 {
		return nil
	}
	return http.NewResponseController(j.w).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.w }

// finish writes the error held back, if any, as JSON. Call it once the handler returned.
func (j *jsonErrors) finish() {
	if j.status == 0 {
		return
	}
	if j.verifyErr != nil && j.status >= 500 {
		// The token could not be checked (the store did not answer): the problem table's
		// status, sentence and Retry-After, its cause kept from the client as on REST.
		p := problem.Of(j.verifyErr)
		if p.Code == problem.CodeUnavailable {
			if p.RetryAfter > 0 {
				j.w.Header().Set("Retry-After", strconv.Itoa(int(p.RetryAfter.Round(time.Second).Seconds())))
			}
			writeError(j.w, http.StatusServiceUnavailable, codeResourceUnavailable, p.Message, "")
			return
		}
	}
	code, message := errorFor(j.status)
	detail := strings.TrimSpace(j.text.String())
	if j.verifyErr != nil {
		detail = "" // the token check's cause (a database's address) stays in the log
	}
	insufficient := j.status == http.StatusForbidden && detail == sdkInsufficientScope
	switch {
	case j.status == http.StatusUnauthorized || insufficient:
		j.w.Header().Set("WWW-Authenticate", challenge(j.status, insufficient, j.hadToken, j.metadataURL))
	case j.status == http.StatusForbidden:
		j.w.Header().Del("WWW-Authenticate") // a session of another token: no token would do
	}
	if insufficient {
		message = "This token lacks the mcp scope, which /mcp needs: use a token with it (or ask for the mcp scope when authorizing)."
	}
	writeError(j.w, j.status, code, message, detail)
}

// sdkInsufficientScope is the text of go-sdk's RequireBearerToken when the token lacks a
// required scope.
const sdkInsufficientScope = "insufficient scope"

// challenge is the WWW-Authenticate of a 401 or of a 403 insufficient_scope (RFC 6750 §3, with
// RFC 9728's resource_metadata): the scope /mcp needs, where to learn how to get a token, and
// why the token given was refused, if one was.
func challenge(status int, insufficient, hadToken bool, metadataURL string) string {
	var params []string
	switch {
	case insufficient:
		params = append(params, `error="insufficient_scope"`)
	case status == http.StatusUnauthorized && hadToken:
		params = append(params, `error="invalid_token"`)
	}
	if metadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", metadataURL))
	}
	params = append(params, `scope="mcp"`)
	return "Bearer " + strings.Join(params, ", ")
}

// checkBody reads a POST's body and answers a parse error when it is not JSON, before the SDK
// (which would answer plain text) sees it. It returns false when it answered.
func checkBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method != http.MethodPost || r.Body == nil || mt != "application/json" {
		return true // the SDK refuses what is not a JSON POST
	}
	tooLarge := func() bool {
		writeError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest,
			fmt.Sprintf("The request body is larger than %s, the most hangar takes (HANGAR_MAX_BODY_BYTES).", problem.Bytes(limit)), "")
		return false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	r.Body.Close()
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case errors.Is(err, problem.ErrBodyTimeout):
		writeError(w, http.StatusRequestTimeout, codeInvalidRequest, "The request body did not arrive in time; send it at once (HANGAR_BODY_TIMEOUT).", err.Error())
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, codeInvalidRequest, "The request body could not be read.", err.Error())
		return false
	case jsoncheck.InvalidUTF8At(body) >= 0:
		writeError(w, http.StatusBadRequest, codeParseError, `Parse error: the request body is not valid UTF-8; send bytes that are not text base64-encoded where a tool takes them (a process's input: "base64": true).`,
			fmt.Sprintf("invalid UTF-8 at byte %d", jsoncheck.InvalidUTF8At(body)))
		return false
	case jsoncheck.LoneSurrogateAt(body) >= 0:
		writeError(w, http.StatusBadRequest, codeInvalidRequest, `The request body has a \u escape that is half of a UTF-16 surrogate pair, which is no character; send the whole pair, or base64 where a tool takes it.`,
			fmt.Sprintf("lone surrogate escape at byte %d", jsoncheck.LoneSurrogateAt(body)))
		return false
	case !json.Valid(body):
		writeError(w, http.StatusBadRequest, codeParseError, "Parse error: the request body is not valid JSON (a JSON-RPC message or batch).", "")
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}
