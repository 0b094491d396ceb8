package cli_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// claudeTurn is a command-agent prompt that prints what Claude Code prints for a tool call
// and a result with its cost.
const claudeTurn = `echo '{"type":"assistant","message":{"content":[{"type":"text","text":"Running the tests."},{"type":"tool_use","name":"Bash","input":{"command":"go test ./..."}}]}}'; ` +
	`echo '{"type":"user","message":{"content":[{"type":"tool_result","content":"ok  all"}]}}'; ` +
	`echo '{"type":"result","subtype":"success","result":"All green.","total_cost_usd":0.25}'`

// TestJobsAndLogs: jobs run -f follows a job's events, made readable, until its turn ends;
// jobs ls lists it; jobs logs -o json gives hangar's events, one JSON a line; logs reads a
// session's.
func TestJobsAndLogs(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "job-box")
	env := s.env(t)
	r := hangar(t, env, "", "jobs", "run", "--agent", "command", "--sandbox", "job-box", "-f", claudeTurn).want(t, 0)
	for _, want := range []string{"Running the tests.", "$ go test ./...", "→ ok all", "result: All green. (cost $0.2500)", "── turn done, exit 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("jobs run -f lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colour into a pipe: %q", r.stdout)
	}
	var jobs struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(hangar(t, env, "", "jobs", "ls", "-o", "json").want(t, 0).stdout), &jobs); err != nil || len(jobs.Jobs) == 0 {
		t.Fatalf("jobs ls -o json: %v %v", jobs, err)
	}
	// Its own job: the shared server runs other tests' jobs (newest first) beside it.
	i := slices.IndexFunc(jobs.Jobs, func(j map[string]any) bool { return j["sandbox"] == "job-box" })
	if i < 0 {
		t.Fatalf("jobs ls -o json lists no job in job-box: %v", jobs.Jobs)
	}
	id := jobs.Jobs[i]["id"].(string)
	if r := hangar(t, env, "", "__complete", "jobs", "logs", "").want(t, 0); !strings.Contains(r.stdout, id+"\techo ") {
		t.Errorf("completing jobs logs' id = %q, want %s (ended) with its prompt", r.stdout, id)
	}
	r = hangar(t, env, "", "jobs", "logs", id, "-o", "json").want(t, 0)
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("jobs logs -o json line %q: %v", line, err)
		}
		types = append(types, ev["type"].(string))
	}
	if strings.Join(types, " ") != "turn.started assistant user result turn.finished" {
		t.Errorf("event types = %v", types)
	}
	session := jobs.Jobs[i]["session"].(string)
	if r := hangar(t, env, "", "logs", session).want(t, 0); !strings.Contains(r.stdout, "$ go test ./...") {
		t.Errorf("logs of the job's session = %q", r.stdout)
	}
}

// TestSessions: sessions create, ls, turn -f (the turn's events until it ends, with the turn's
// exit), logs by name, rm.
func TestSessions(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "ses-box")
	env := s.env(t)
	hangar(t, env, "", "sessions", "create", "ses-chat", "--sandbox", "ses-box", "--agent", "command").want(t, 0)
	t.Cleanup(func() { hangar(t, env, "", "sessions", "rm", "ses-chat") })
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(hangar(t, env, "", "sessions", "ls", "-o", "json").want(t, 0).stdout), &list); err != nil {
		t.Fatal(err)
	}
	wantSessionState(t, env, "ses-chat", "idle")
	for _, args := range [][]string{{"logs", ""}, {"sessions", "rm", ""}, {"sessions", "turn", ""}, {"sessions", "cancel", ""}} {
		if r := hangar(t, env, "", append([]string{"__complete"}, args...)...).want(t, 0); !strings.Contains(r.stdout, "ses-chat\tcommand in ses-box\n") {
			t.Errorf("completing %s's session = %q, want ses-chat", args[:len(args)-1], r.stdout)
		}
	}
	if r := hangar(t, env, "", "__complete", "sessions", "create", "x", "--sandbox", "").want(t, 0); !strings.Contains(r.stdout, "ses-box\n") {
		t.Errorf("completing sessions create --sandbox = %q, want ses-box", r.stdout)
	}
	r := hangar(t, env, "", "sessions", "turn", "-f", "ses-chat", claudeTurn).want(t, 0)
	if !strings.Contains(r.stdout, "$ go test ./...") || !strings.Contains(r.stdout, "── turn done, exit 0") {
		t.Errorf("turn -f = %q", r.stdout)
	}
	r = hangar(t, env, "", "sessions", "turn", "-f", "ses-chat", "echo '{\"type\":\"tick\"}'; exit 3").want(t, 1)
	if strings.Contains(r.stdout, "go test") || !strings.Contains(r.stdout, "── turn failed, exit 3") {
		t.Errorf("the second turn -f = %q, want its own events only, ending failed", r.stdout)
	}
	wantSessionState(t, env, "ses-chat", "failed")
	if r := hangar(t, env, "", "logs", "ses-chat").want(t, 0); strings.Count(r.stdout, "started (command)") != 2 {
		t.Errorf("logs = %q, want both turns", r.stdout)
	}
}

// wantSessionState fails t unless sessions ls shows the session name in state, in its STATE
// column.
func wantSessionState(t *testing.T, env []string, name, state string) {
	t.Helper()
	lines := strings.Split(hangar(t, env, "", "sessions", "ls").want(t, 0).stdout, "\n")
	header := strings.Fields(lines[0])
	col := slices.Index(header, "STATE")
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) > col && f[0] == name {
			if col < 0 || f[col] != state {
				t.Errorf("sessions ls: %q, want %s's STATE %s (header %q)", line, name, state, lines[0])
			}
			return
		}
	}
	t.Errorf("sessions ls = %q, want a line for %s", lines, name)
}
