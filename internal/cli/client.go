package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// client is a small typed client of hangar's REST API.
type client struct {
	base  string // e.g. http://127.0.0.1:8080, no trailing slash
	token string
	http  *http.Client // no timeout: streams last as long as their command
}

func newClient(base, token string) *client {
	return &client{base: base, token: token, http: &http.Client{}}
}

// apiError is an error hangar answered with: {"error": {"code", "message", "detail"}}.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  string `json:"detail"`
}

// Error is hangar's sentence for a person, with what to do where the sentence cannot know it.
func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("hangar answered %d %s", e.Status, http.StatusText(e.Status))
	}
	switch e.Status {
	case http.StatusUnauthorized:
		msg += " Run hangar login with a valid token (or set HANGAR_TOKEN)."
	case http.StatusBadRequest, http.StatusConflict, http.StatusTooManyRequests:
		// The detail's last clause says which thing and why ("sandbox demo is paused; resume
		// it first"), where the sentence is general.
		if _, tail, ok := strings.Cut(e.Detail, ": "); ok && tail != "" && !strings.Contains(msg, tail) {
			msg = strings.TrimSuffix(msg, ".") + " (" + tail + ")."
		}
	}
	return msg
}

// request sends method path with body (JSON, when not nil) and header, and returns the response
// when its status is 2xx; any other status is an *apiError. The caller closes the body.
func (c *client) request(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("hangar's address %q is not a URL: set HANGAR_URL (or run hangar login) to one such as %s", c.base, defaultURL)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.reachError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// reachError is a failed request's error in words: hangar is not there, or the context ended.
func (c *client) reachError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &reachErr{fmt.Sprintf("cannot reach hangar at %s: is it running? (set HANGAR_URL)", c.base), err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &reachErr{fmt.Sprintf("cannot reach hangar at %s: %v (set HANGAR_URL)", c.base, err), err}
}

// reachErr is a request that never got an answer: worth trying again when following a stream.
type reachErr struct {
	msg   string
	cause error
}

func (e *reachErr) Error() string { return e.msg }
func (e *reachErr) Unwrap() error { return e.cause }

func readAPIError(resp *http.Response) error {
	e := &apiError{Status: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		body.Error.Status = resp.StatusCode
		return body.Error
	}
	return e
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("read hangar's answer to %s %s: %w", method, path, err)
	}
	return nil
}

// stream opens a Server-Sent Events response; lastID, when set, is sent as Last-Event-ID.
func (c *client) stream(ctx context.Context, method, path string, body any, lastID string) (*sseReader, io.Closer, error) {
	h := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	resp, err := c.request(ctx, method, path, body, h)
	if err != nil {
		return nil, nil, err
	}
	return newSSEReader(resp.Body), resp.Body, nil
}

// esc escapes one path segment (a sandbox's name, an id).
func esc(s string) string { return url.PathEscape(s) }
