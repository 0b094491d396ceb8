package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlowBodiesTimeOut is finding 5's reproduction: 40 connections to /oauth/register, none
// with a token, each announcing a 100,000-byte body and sending one byte of it, at the default
// registration limit (10 a minute, and every connection is from 127.0.0.1); then such
// connections to the REST API and to /mcp, with a token and without. Each is answered once its
// body deadline passes, and closed: 408 where a handler read the body; the 429s and 401s, whose
// handlers answer without reading it, go out once net/http's discard of the body misses the
// same deadline (before, that discard had none, and held the connection ~200,000 s).
func TestSlowBodiesTimeOut(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.PublicURL = "https://hangar.example.com"
	cfg.BodyTimeout = 500 * time.Millisecond
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	heads := make([]string, 0, 45)
	for range 40 {
		heads = append(heads, "POST /oauth/register HTTP/1.1\r\nHost: hangar\r\n")
	}
	const (
		apiTok = 40 + iota // the REST API and /mcp read their bodies their own ways
		mcpTok
		apiAnon // unauthenticated: 401 without reading the body
		mcpAnon
		nowhere // 404 without reading the body
	)
	heads = append(heads,
		"POST /api/sandboxes HTTP/1.1\r\nHost: hangar\r\nAuthorization: Bearer "+tok+"\r\n",
		"POST /mcp HTTP/1.1\r\nHost: hangar\r\nAuthorization: Bearer "+tok+"\r\nAccept: application/json, text/event-stream\r\n",
		"POST /api/sandboxes HTTP/1.1\r\nHost: hangar\r\n",
		"POST /mcp HTTP/1.1\r\nHost: hangar\r\nAccept: application/json, text/event-stream\r\n",
		"POST /nowhere HTTP/1.1\r\nHost: hangar\r\n")
	var wg sync.WaitGroup
	answers := make([]string, len(heads))
	for i, head := range heads {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(waitTimeout)) // bounds the test, not hangar
		if _, err := io.WriteString(c, head+"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				answers[i] = "no answer: " + err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// Then the connection is closed: nothing more, EOF.
			if _, err := br.ReadByte(); err != io.EOF {
				answers[i] = "the connection stayed open after the answer"
				return
			}
			answers[i] = resp.Status + " " + string(body)
		})
	}
	wg.Wait()
	timedOut := func(a string) bool {
		return strings.HasPrefix(a, "408 ") && strings.Contains(a, "did not arrive in time")
	}
	refused := 0
	for i, a := range answers {
		switch {
		case i < 40 && strings.HasPrefix(a, "429 "):
			refused++
		case i < 40 || i == apiTok || i == mcpTok:
			if !timedOut(a) {
				t.Errorf("connection %d: %s; want 408 (or 429 at /oauth/register), the body did not arrive in time, and the connection closed", i, a)
			}
		case i == nowhere:
			if !strings.HasPrefix(a, "404 ") {
				t.Errorf("connection %d: %s; want 404 and the connection closed", i, a)
			}
		default:
			if !strings.HasPrefix(a, "401 ") {
				t.Errorf("connection %d: %s; want 401 and the connection closed", i, a)
			}
		}
	}
	if refused == 0 {
		t.Errorf("no registration was refused; want the 11th and later refused 429 at the default limit")
	}
}

// TestBodyDeadlineSparesStreams: a streamed command that outlives the body deadline is not cut:
// the deadline bounds only the reading of its request's body.
func TestBodyDeadlineSparesStreams(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Providers.DaemonBinary = sharedEnvd(t)
	cfg.BodyTimeout = 200 * time.Millisecond
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	if code, body := ts.api(t, "POST", "/api/sandboxes", tok, `{"name": "slow"}`); code != 201 {
		t.Fatalf("create = %d %v", code, body)
	}
	t.Cleanup(func() { ts.api(t, "DELETE", "/api/sandboxes/slow", tok, "") })
	// Ten lines, 0.1 s apart: the stream lasts five times the body deadline.
	req, _ := http.NewRequest("POST", ts.url+"/api/sandboxes/slow/exec/stream", strings.NewReader(
		`{"command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.1; done"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	client := &http.Client{Timeout: waitTimeout}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream broke: %v\n%s", err, out)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(out), "line10") || !strings.Contains(string(out), `"exit_code":0`) {
		t.Errorf("stream = %d\n%s\nwant every line and the exit code", resp.StatusCode, out)
	}

	// The same over MCP: a call that answers after five body deadlines gets its result.
	req, _ = http.NewRequest("POST", ts.url+"/mcp", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": {"name": "exec", "arguments": {"sandbox": "slow", "command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.1; done"},
		"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "exec")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the MCP call broke: %v\n%s", err, out)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(out), "line10") || !strings.Contains(string(out), `"exit_code":0`) {
		t.Errorf("MCP call = %d\n%s\nwant every line and the exit code", resp.StatusCode, out)
	}
}
