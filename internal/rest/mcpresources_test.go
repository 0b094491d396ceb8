package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// onResource does an MCP resource operation for the isolation matrix and returns its outcome:
// ok, "ok, hidden" (a list without listed), "not found" (the JSON-RPC "Resource not found"),
// or 401.
func (w *world) onResource(t *testing.T, era string, col int, token, op, uri, listed string) string {
	t.Helper()
	s, refused := w.session(t, era, col, token)
	if s == nil {
		return refused
	}
	ctx, cancel := context.WithTimeout(context.Background(), isolationTimeout)
	defer cancel()
	var err error
	switch op {
	case "list":
		var res *mcp.ListResourcesResult
		if res, err = s.ListResources(ctx, nil); err == nil {
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), listed) {
				return "ok, hidden"
			}
		}
	case "read":
		_, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	case "subscribe":
		if era >= "2026" {
			return w.listenOutcome(t, ctx, token, uri)
		}
		if err = s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err == nil {
			err = s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
		}
	}
	var we *jsonrpc.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidParams && we.Message == "Resource not found":
		return "not found"
	default:
		return "error: " + err.Error()
	}
}

// listenOutcome sends a raw 2026-07-28 subscriptions/listen for uri (the go-sdk client's
// Subscribe does not report a refused listen) and returns ok when it is acknowledged, then
// ends it.
func (w *world) listenOutcome(t *testing.T, ctx context.Context, token, uri string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + uri + `"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"isolation","version":"1"}}}}`
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listen
	req, _ := http.NewRequestWithContext(ctx, "POST", w.e.url+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("listen %s: %v", uri, err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			t.Fatalf("listen %s: %d, %v", uri, resp.StatusCode, err)
		}
		line = strings.TrimPrefix(line, "data: ")
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m struct {
			Method string         `json:"method"`
			Error  *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("listen %s: %q", uri, line)
		}
		switch {
		case m.Method == "notifications/subscriptions/acknowledged":
			return "ok"
		case m.Error != nil && m.Error.Code == jsonrpc.CodeInvalidParams && m.Error.Message == "Resource not found":
			return "not found"
		default:
			return "error: " + line
		}
	}
}
