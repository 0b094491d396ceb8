package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends one 2025-era JSON-RPC message to /mcp (in session sid when set) and returns the
// response, whose body the caller closes.
func (e *env) post(t *testing.T, ctx context.Context, token, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	return resp
}

// open sends a 2025-era initialize and returns the session's id.
func (e *env) open(t *testing.T, token string) string {
	t.Helper()
	resp := e.post(t, context.Background(), token, "", initializeBody)
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	return sid
}

// initialize opens a 2025-era session, initialized, and returns its id.
func (e *env) initialize(t *testing.T, token string) string {
	t.Helper()
	sid := e.open(t, token)
	resp := e.post(t, context.Background(), token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return sid
}

// jsonRPCError decodes an HTTP error answered as a JSON-RPC error response.
func jsonRPCError(t *testing.T, resp *http.Response) (code int, message string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.JSONRPC != "2.0" || out.Error.Message == "" {
		t.Fatalf("%d: body is not a JSON-RPC error: %q", resp.StatusCode, raw)
	}
	return out.Error.Code, out.Error.Message
}

// waitSessions polls until the token has n sessions open.
func (e *env) waitSessions(t *testing.T, tokenID string, n int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for e.mcp.Sessions(tokenID) != n {
		if time.Now().After(deadline) {
			t.Fatalf("token %s has %d sessions, want %d", tokenID, e.mcp.Sessions(tokenID), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionsPerToken: a token holds at most HANGAR_MCP_SESSIONS_PER_TOKEN sessions; however
// many more initializes it sends, they are refused (429, JSON, Retry-After) and the count stays
// put; ending one makes room; another token is not affected.
func TestSessionsPerToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{sessionsPerToken: 3})
	id, secret := e.newToken(t, `{"user": "ada", "scopes": ["mcp"]}`)
	var sids []string
	for range 3 {
		sids = append(sids, e.initialize(t, secret))
	}
	for range 50 {
		resp := e.post(t, context.Background(), secret, "", initializeBody)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("initialize over the cap: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		code, msg := jsonRPCError(t, resp)
		resp.Body.Close()
		if code != -32029 || !strings.Contains(msg, "HANGAR_MCP_SESSIONS_PER_TOKEN") {
			t.Fatalf("over the cap: %d %q", code, msg)
		}
	}
	if n := e.mcp.Sessions(id); n != 3 {
		t.Fatalf("%d sessions after 53 initializes with a cap of 3", n)
	}
	_, other := e.newToken(t, `{"user": "bob", "scopes": ["mcp"]}`)
	e.initialize(t, other)

	req, _ := http.NewRequest("DELETE", e.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Mcp-Session-Id", sids[0])
	resp, err := e.http.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE session: %v %v", resp, err)
	}
	resp.Body.Close()
	e.initialize(t, secret)
	if n := e.mcp.Sessions(id); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
}

// TestSessionIdleExpiry: a session without requests for HANGAR_MCP_SESSION_IDLE_SECONDS is
// closed, and a request in it then gets 404 with a sentence saying why.
func TestSessionIdleExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{sessionIdle: 50 * time.Millisecond})
	id, secret := e.newToken(t, `{"user": "ada", "scopes": ["mcp"]}`)
	sid := e.open(t, secret) // not initialized: the next request might come after the timeout
	e.waitSessions(t, id, 0)
	resp := e.post(t, context.Background(), secret, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request in an expired session: %d", resp.StatusCode)
	}
	if _, msg := jsonRPCError(t, resp); !strings.Contains(msg, "HANGAR_MCP_SESSION_IDLE_SECONDS") {
		t.Errorf("message %q does not say why the session is gone", msg)
	}
}

// TestRevokedTokenSessionsEnd: revoking a token closes its sessions at the next recheck, and
// with them its open GET stream.
func TestRevokedTokenSessionsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id, secret := e.newToken(t, `{"user": "ada", "scopes": ["mcp"]}`)
	otherID, other := e.newToken(t, `{"user": "bob", "scopes": ["mcp"]}`)
	sid := e.initialize(t, secret)
	e.initialize(t, other)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	get, err := e.http.Do(req)
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp: %v %v", get, err)
	}
	defer get.Body.Close()
	if status, out := e.do(t, "DELETE", "/api/tokens/"+id, e.admin, ""); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %v", status, out)
	}
	// The stream ends (EOF) rather than running until the test's timeout.
	r := bufio.NewReader(get.Body)
	for {
		if _, err := r.ReadString('\n'); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the revoked token's GET stream is still open")
			}
			break
		}
	}
	e.waitSessions(t, id, 0)
	if n := e.mcp.Sessions(otherID); n != 1 {
		t.Errorf("another token's session count went from 1 to %d", n)
	}
}

// TestHTTPErrorsAreJSON: what /mcp refuses before any tool runs (the SDK's and the token
// check's own answers included) comes as a JSON-RPC error in JSON, with its HTTP status kept.
func TestHTTPErrorsAreJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	toolCall := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "exec"}
	for _, tc := range []struct {
		name                string
		method, token, body string
		header              map[string]string
		status, code        int
		want                string // in the message
	}{
		{"no token", "POST", "", initializeBody, nil, 401, -32001, "bearer token"},
		{"bad token", "POST", "nope", initializeBody, nil, 401, -32001, "bearer token"},
		{"unknown session", "POST", staticSecret, `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
			map[string]string{"Mcp-Session-Id": "nosuch", "MCP-Protocol-Version": "2025-11-25"}, 404, -32600, "no such MCP session"},
		{"method", "PUT", staticSecret, "", nil, 405, -32600, "HTTP method"},
		{"not JSON (2025)", "POST", staticSecret, `{"jsonrpc": "2.0", "id": 1,`, nil, 400, -32700, "not valid JSON"},
		{"not JSON (2026)", "POST", staticSecret, `{"jsonrpc": "2.0", "id": 1,`, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, 400, -32700, "not valid JSON"},
		{"content type", "POST", staticSecret, initializeBody, map[string]string{"Content-Type": "text/plain"}, 415, -32600, "Content-Type"},
		// encoding/json would turn these into U+FFFD and run the command it mangled.
		{"not UTF-8", "POST", staticSecret, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"name":"exec","arguments":{"sandbox":"box","command":"echo ` + "\xff\xfe" + `"}}}`,
			toolCall, 400, -32700, "not valid UTF-8"},
		{"a lone surrogate", "POST", staticSecret, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"name":"exec","arguments":{"sandbox":"box","command":"echo \ud800"}}}`,
			toolCall, 400, -32600, "surrogate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.url+"/mcp", strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if code, msg := jsonRPCError(t, resp); code != tc.code || !strings.Contains(msg, tc.want) {
				t.Errorf("error = %d %q, want %d saying %q", code, msg, tc.code, tc.want)
			}
			if tc.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestBodyCap: a body over HANGAR_MAX_BODY_BYTES is 413 with a JSON-RPC error naming the cap,
// whether its length was announced or it came chunked; one under it is taken.
func TestBodyCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBody: 64 << 10})
	padded := func(n int) string { // initializeBody, n bytes long
		return strings.Replace(initializeBody, `"params":{`, `"params":{"_pad":"`+strings.Repeat("x", n-len(initializeBody)-10)+`",`, 1)
	}
	for _, tc := range []struct {
		name    string
		body    io.Reader
		status  int
		chunked bool
	}{
		{"announced", strings.NewReader(padded(100 << 10)), 413, false},
		{"chunked", io.MultiReader(strings.NewReader(padded(100 << 10))), 413, true},
		{"under the cap", strings.NewReader(padded(60 << 10)), 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url+"/mcp", tc.body)
			if tc.chunked != (req.ContentLength <= 0) {
				t.Fatalf("ContentLength %d: the request is not the kind this case is about", req.ContentLength)
			}
			req.Header.Set("Authorization", "Bearer "+staticSecret)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				raw, _ := io.ReadAll(resp.Body)
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, raw, tc.status)
			}
			if tc.status != 413 {
				return
			}
			if code, msg := jsonRPCError(t, resp); code != -32600 || !strings.Contains(msg, "64 KiB") || !strings.Contains(msg, "HANGAR_MAX_BODY_BYTES") {
				t.Errorf("error = %d %q, want -32600 naming 64 KiB and HANGAR_MAX_BODY_BYTES", code, msg)
			}
		})
	}
}

// TestCapabilities: hangar declares only what it has: tools (no prompts, resources or logging).
func TestCapabilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	c := e.connect(t, staticSecret, eras[0])
	// As the client got them on the wire (the SDK's Logging field is deprecated).
	b, err := json.Marshal(c.session.InitializeResult().Capabilities)
	if err != nil {
		t.Fatal(err)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	if caps["tools"] == nil || caps["prompts"] != nil || caps["resources"] != nil || caps["logging"] != nil {
		t.Errorf("capabilities = %s, want tools only", b)
	}
}
