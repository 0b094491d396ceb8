package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool calls a tool and returns its structured result, or its error text.
func (s *subscriber) tool(t *testing.T, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		return nil, res.Content[0].(*mcp.TextContent).Text
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out, ""
}

// TestTurnTools drives an agent through the tools, in both eras: a session made, a turn run
// to its end, a turn refused while another runs, a running turn cancelled, a job run and read;
// and bad input refused with a sentence.
func TestTurnTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := e.subscriber(t, tok, era, nil)
			name := "driven-" + era[:4]
			se, msg := s.tool(t, "session", map[string]any{"action": "create", "name": name, "sandbox": "box", "agent": "command",
				"env": map[string]any{"API_KEY": "secret-value"}})
			if msg != "" || se["name"] != name || se["events"] != "hangar://sessions/"+name+"/events" {
				t.Fatalf("session create = %v %q", se, msg)
			}
			if b, _ := json.Marshal(se); strings.Contains(string(b), "secret-value") {
				t.Errorf("a session shows its env's values: %s", b)
			}
			turn, msg := s.tool(t, "turn", map[string]any{"action": "start", "session": name, "prompt": `echo '{"type":"done-line"}'`})
			if msg != "" || turn["id"] == nil {
				t.Fatalf("turn start = %v %q", turn, msg)
			}
			waitFor(t, "the turn to end", func() bool {
				got, _ := s.tool(t, "turn", map[string]any{"action": "get", "session": name, "turn_id": turn["id"]})
				return got["state"] == "done"
			})
			evs, msg := s.tool(t, "session", map[string]any{"action": "events", "session": name, "since": 1, "limit": 1})
			if list, _ := evs["events"].([]any); msg != "" || len(list) != 1 || evs["next"] != 2.0 {
				t.Errorf("session events since 1 limit 1 = %v %q, want event 2 and next 2", evs, msg)
			}

			long, msg := s.tool(t, "turn", map[string]any{"action": "start", "session": name, "prompt": "sleep 60"})
			if msg != "" {
				t.Fatalf("start a long turn: %q", msg)
			}
			if _, msg := s.tool(t, "turn", map[string]any{"action": "start", "session": name, "prompt": "true"}); !strings.Contains(msg, "turn is running") {
				t.Errorf("a second turn while one runs: %q, want a conflict", msg)
			}
			if got, msg := s.tool(t, "turn", map[string]any{"action": "cancel", "session": name, "turn_id": long["id"]}); msg != "" {
				t.Errorf("cancel = %v %q", got, msg)
			}
			waitFor(t, "the cancelled turn to end", func() bool {
				got, _ := s.tool(t, "turn", map[string]any{"action": "get", "session": name, "turn_id": long["id"]})
				return got["state"] == "cancelled"
			})
			list, _ := s.tool(t, "turn", map[string]any{"action": "list", "session": name})
			if ts, _ := list["turns"].([]any); len(ts) != 2 {
				t.Errorf("turn list = %v, want 2 turns", list)
			}

			job, msg := s.tool(t, "job", map[string]any{"action": "start", "prompt": `echo '{"type":"job-line"}'`, "agent": "command", "sandbox": "box"})
			if msg != "" || job["id"] == nil || job["events"] != "hangar://jobs/"+job["id"].(string)+"/events" {
				t.Fatalf("job start = %v %q", job, msg)
			}
			waitFor(t, "the job to end", func() bool {
				got, _ := s.tool(t, "job", map[string]any{"action": "get", "job_id": job["id"]})
				return got["state"] == "done"
			})
			jevs, _ := s.tool(t, "job", map[string]any{"action": "events", "job_id": job["id"]})
			if l, _ := jevs["events"].([]any); len(l) != 3 || jevs["next"] != 3.0 {
				t.Errorf("job events = %v, want turn.started, the line, turn.finished", jevs)
			}
			jobs, _ := s.tool(t, "job", map[string]any{"action": "list"})
			if b, _ := json.Marshal(jobs); !strings.Contains(string(b), job["id"].(string)) {
				t.Errorf("job list = %s, want %s", b, job["id"])
			}
		})
	}
}

// TestTurnToolsBadInput: each mistake gets a tool error that says what is wrong.
func TestTurnToolsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	s := e.subscriber(t, tok, eras[1], nil)
	if _, msg := s.tool(t, "session", map[string]any{"action": "create", "name": "ok", "sandbox": "box", "agent": "command"}); msg != "" {
		t.Fatal(msg)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"session", map[string]any{}, `missing properties: ["action"]`},
		{"session", map[string]any{"action": ""}, "Say what to do"},
		{"session", map[string]any{"action": "delete"}, `no action "delete"`},
		{"session", map[string]any{"action": "create", "name": "x", "agent": "command"}, "Say which sandbox"},
		{"session", map[string]any{"action": "create", "name": "x", "sandbox": "box", "agent": "nope"}, "unknown agent"},
		{"session", map[string]any{"action": "get", "session": "nothing"}, "no such session"},
		{"session", map[string]any{"action": "events", "session": "ok", "limit": 5000}, "limit must be"},
		{"session", map[string]any{"action": "events", "session": "ok", "since": -1}, "since must be"},
		{"turn", map[string]any{"action": "start", "session": "", "prompt": "true"}, "Say which session"},
		{"turn", map[string]any{"action": "start", "session": "ok", "prompt": ""}, "prompt"},
		{"turn", map[string]any{"action": "get", "session": "ok"}, "Say which turn"},
		{"turn", map[string]any{"action": "get", "session": "ok", "turn_id": "turn_nothing"}, "no such session, turn or job"},
		{"job", map[string]any{"action": "start", "prompt": "true", "agent": "command"}, "Say where the job runs"},
		{"job", map[string]any{"action": "start", "prompt": "true", "agent": "nope", "sandbox": "box"}, "unknown agent"},
		{"job", map[string]any{"action": "start", "prompt": "true", "agent": "command", "new_sandbox": map[string]any{"name": "wd", "workdir": "/../.."}}, "folder itself"},
		{"job", map[string]any{"action": "get"}, "Say which job"},
		{"job", map[string]any{"action": "cancel", "job_id": "job_nothing"}, "no such session, turn or job"},
	} {
		if _, msg := s.tool(t, tc.tool, tc.args); !strings.Contains(msg, tc.want) {
			t.Errorf("%s %v: %q, want it to say %q", tc.tool, tc.args, msg, tc.want)
		}
	}
}

// TestScopesAddUp: a token with the mcp and jobs scopes (an OAuth grant with both ticked) acts
// over MCP as an mcp token does, since jobs adds nothing at /mcp: it lists its user's sessions,
// makes one, and sees its user's jobs, not only its own.
func TestScopesAddUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, user := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, user, "box", "")
	e.session(t, user, "existing", "box")
	_, both := e.userToken(t, "ada", "mcp", "jobs")
	u := e.subscriber(t, user, eras[1], nil)
	job, msg := u.tool(t, "job", map[string]any{"action": "start", "prompt": "true", "agent": "command", "sandbox": "box"})
	if msg != "" {
		t.Fatalf("job start by the user token: %q", msg)
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := e.subscriber(t, both, era, nil)
			list, msg := s.tool(t, "session", map[string]any{"action": "list"})
			if b, _ := json.Marshal(list); msg != "" || !strings.Contains(string(b), `"existing"`) {
				t.Errorf("session list by an mcp+jobs token = %s %q, want ada's session", b, msg)
			}
			name := "both-" + era[:4]
			if se, msg := s.tool(t, "session", map[string]any{"action": "create", "name": name, "sandbox": "box", "agent": "command"}); msg != "" || se["name"] != name {
				t.Errorf("session create by an mcp+jobs token = %v %q", se, msg)
			}
			jobs, msg := s.tool(t, "job", map[string]any{"action": "list"})
			if b, _ := json.Marshal(jobs); msg != "" || !strings.Contains(string(b), job["id"].(string)) {
				t.Errorf("job list by an mcp+jobs token = %s %q, want the user token's job %s", b, msg, job["id"])
			}
		})
	}
}
