package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireTimeout bounds each MCP call and wait of TestOneShapePerEntity.
const wireTimeout = 60 * time.Second

// TestOneShapePerEntity: what REST answers for a session, a turn, a job, their events, a
// process and a command's result is, field for field, what the MCP tools give as structured content for the same one
// (both come from internal/wire).
func TestOneShapePerEntity(t *testing.T) {
	e := newEnv(t, func(e *env) { e.withMCP = true })
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	s := e.mcpSession(t, ada)
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command", "env": {"K": "v"}}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	r := e.do(t, "POST", "/api/sessions/s1/turns", ada, `{"prompt": "echo '{\"type\":\"hi\"}'"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	turn := r.body["id"].(string)
	e.waitEnded(t, "/api/sessions/s1/turns/"+turn, ada)
	r = e.do(t, "POST", "/api/jobs", ada, `{"prompt": "echo '{\"type\":\"hi\"}'", "agent": "command", "sandbox": "box"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/jobs = %d %s", r.status, r.raw)
	}
	job := r.body["id"].(string)
	e.waitEnded(t, "/api/jobs/"+job, ada)
	r = e.do(t, "POST", "/api/sandboxes/box/processes", ada, `{"command": "echo hi"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST processes = %d %s", r.status, r.raw)
	}
	proc := r.body["process_id"].(string)
	e.waitExited(t, "/api/sandboxes/box/processes/"+proc, ada)

	for _, c := range []struct {
		name, get, tool, args string
	}{
		{"session", "/api/sessions/s1", "session", `{"action": "get", "session": "s1"}`},
		{"sessions", "/api/sessions", "session", `{"action": "list"}`},
		{"turn", "/api/sessions/s1/turns/" + turn, "turn", `{"action": "get", "session": "s1", "turn_id": "` + turn + `"}`},
		{"turns", "/api/sessions/s1/turns", "turn", `{"action": "list", "session": "s1"}`},
		{"job", "/api/jobs/" + job, "job", `{"action": "get", "job_id": "` + job + `"}`},
		{"jobs", "/api/jobs", "job", `{"action": "list"}`},
		{"session events", "/api/sessions/s1/events", "session", `{"action": "events", "session": "s1"}`},
		{"job events", "/api/jobs/" + job + "/events", "job", `{"action": "events", "job_id": "` + job + `"}`},
		{"processes", "/api/sandboxes/box/processes", "process", `{"action": "list", "sandbox": "box"}`},
	} {
		rest := e.do(t, "GET", c.get, ada, "")
		if rest.status != http.StatusOK {
			t.Fatalf("%s: GET %s = %d %s", c.name, c.get, rest.status, rest.raw)
		}
		viaMCP := callTool(t, s, c.tool, c.args)
		if !reflect.DeepEqual(rest.body, viaMCP) {
			b, _ := json.Marshal(viaMCP)
			t.Errorf("%s: REST and MCP differ\nREST %s\nMCP  %s", c.name, rest.raw, b)
		}
	}
	// A command's result (wire.ExecResult), non-UTF-8 output included.
	const cmd = `"command": "printf 'hi\\n'; printf '\\377' >&2; exit 3"`
	rest := e.do(t, "POST", "/api/sandboxes/box/exec", ada, `{`+cmd+`}`)
	if rest.status != http.StatusOK || rest.body["exit_code"] != 3.0 || rest.body["stderr_encoding"] != "base64" {
		t.Fatalf("POST exec = %d %s: want 200, exit_code 3 and stderr base64", rest.status, rest.raw)
	}
	if viaMCP := callTool(t, s, "exec", `{"sandbox": "box", `+cmd+`}`); !reflect.DeepEqual(rest.body, viaMCP) {
		b, _ := json.Marshal(viaMCP)
		t.Errorf("exec: REST and MCP differ\nREST %s\nMCP  %s", rest.raw, b)
	}

	// The fields one transport lacked before they shared a shape.
	se := e.do(t, "GET", "/api/sessions/s1", ada, "").body
	if se["events"] != "hangar://sessions/s1/events" || se["split"] != false {
		t.Errorf("GET /api/sessions/s1 = %v: want events hangar://sessions/s1/events and split false", se)
	}
	if j := e.do(t, "GET", "/api/jobs/"+job, ada, "").body; j["events"] != "hangar://jobs/"+job+"/events" {
		t.Errorf("GET /api/jobs/%s events = %v", job, j["events"])
	}
}

// mcpSession connects an MCP client to e's /mcp with the token.
func (e *env) mcpSession(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "wire", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	s, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callTool calls a tool and returns its structured content, failing on an error.
func callTool(t *testing.T, s *mcp.ClientSession, name, args string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: m})
	if err != nil || res.IsError {
		t.Fatalf("%s %s: %v %+v", name, args, err, res)
	}
	out, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("%s %s: structured content %T", name, args, res.StructuredContent)
	}
	return out
}

// waitExited polls GET path until its process has exited.
func (e *env) waitExited(t *testing.T, path, tok string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	for {
		r := e.do(t, "GET", path, tok, "")
		if p, _ := r.body["process"].(map[string]any); p["state"] == "exited" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s not exited at the deadline: %s", path, r.raw)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
