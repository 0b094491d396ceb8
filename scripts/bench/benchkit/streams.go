package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
)

// ExecStream posts cmd to the sandbox's REST exec/stream and calls onData with each stdout or
// stderr event's data as it arrives; it returns the result event.
func (s *Server) ExecStream(ctx context.Context, sandbox, cmd string, onData func(data []byte, at time.Time)) (map[string]any, error) {
	body, _ := json.Marshal(map[string]any{"command": cmd})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/api/sandboxes/"+sandbox+"/exec/stream", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("exec/stream: %d %s", resp.StatusCode, raw)
	}
	var result map[string]any
	var closed []byte // the close event's data
	err = SSEEvents(resp.Body, func(name string, data []byte) error {
		at := time.Now()
		switch name {
		case "stdout", "stderr":
			var ev struct{ Data string }
			if err := json.Unmarshal(data, &ev); err != nil {
				return err
			}
			onData([]byte(ev.Data), at)
		case "result":
			return json.Unmarshal(data, &result)
		case "error":
			return fmt.Errorf("exec/stream error event: %s", data)
		case "close":
			closed = append([]byte{}, data...)
		}
		return nil
	})
	if err == nil && result == nil {
		// A stream that ends without its result failed, whatever its end said.
		err = errors.New("exec/stream ended without a result")
		if closed != nil {
			err = fmt.Errorf("%w (close: %s)", err, closed)
		}
	}
	return result, err
}

// MCPSession is what a bare HTTP client of the MCP endpoint puts in its requests: the session
// (empty for the stateless revisions) and the protocol version, from a go-sdk client that
// initialized it.
type MCPSession struct {
	ID, Version string
}

// MCPExecStream calls the exec tool with stream=true as a bare HTTP client, not go-sdk's:
// the tools/call posted with id, and its SSE response read on this goroutine, each progress
// notification's message passed to onProgress as it arrives, until the call's answer.
func (s *Server) MCPExecStream(ctx context.Context, sess MCPSession, id int64, sandbox, cmd string, onProgress func(msg string, at time.Time)) error {
	// What go-sdk's client puts in every request of the stateless protocol (2026-07-28 and on).
	meta := map[string]any{"progressToken": "http", "io.modelcontextprotocol/protocolVersion": sess.Version,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "hangar-bench-http", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	call := map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
		"name": "exec", "arguments": map[string]any{"sandbox": sandbox, "command": cmd, "stream": true}, "_meta": meta}}
	body, _ := json.Marshal(call)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sess.ID != "" {
		req.Header.Set("Mcp-Session-Id", sess.ID)
	}
	req.Header.Set("Mcp-Protocol-Version", sess.Version)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "exec")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("tools/call: %d %s", resp.StatusCode, raw)
	}
	var done bool
	err = SSEEvents(resp.Body, func(_ string, data []byte) error {
		at := time.Now()
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			return err
		}
		switch {
		case msg.Method == "notifications/progress":
			onProgress(msg.Params.Message, at)
		case msg.Error != nil:
			return fmt.Errorf("tools/call: %s", msg.Error.Message)
		case msg.Result != nil:
			if msg.Result.IsError {
				return errors.New("tools/call: the tool failed")
			}
			done = true
			return io.EOF // the answer: the stream is over
		}
		return nil
	})
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err == nil && !done {
		err = errors.New("tools/call: the stream ended without an answer")
	}
	return err
}

// DaemonStream runs cmd with bash through the daemon c and calls onData with its stdout as it
// arrives, until the command ends.
func DaemonStream(ctx context.Context, c *envd.Client, cmd string, onData func(data []byte, at time.Time)) error {
	st, err := c.Start(ctx, envd.StartRequest{Cmd: "bash", Args: []string{"-lc", cmd}})
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ev.Kind == envd.EventStdout {
			onData(ev.Data, time.Now())
		}
	}
}
