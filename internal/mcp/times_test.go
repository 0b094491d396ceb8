package mcp_test

import (
	"encoding/json"
	"regexp"
	"testing"
)

// A time as the tools write it (wire's layout), and a time key written as no time: null or "".
var (
	timeValue = regexp.MustCompile(`"(\w+_at)":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`)
	noTime    = regexp.MustCompile(`"\w+_at":(null|"")`)
)

// checkTimes fails unless v's times are exactly want (keys, in any order), each in the layout:
// a time not set yet is left out, as the tools wrote it before wire (never null, never "").
func checkTimes(t *testing.T, what string, v map[string]any, want ...string) {
	t.Helper()
	b, _ := json.Marshal(v)
	if m := noTime.Find(b); m != nil {
		t.Errorf("%s writes %s: %s", what, m, b)
	}
	got := map[string]bool{}
	for _, m := range timeValue.FindAllSubmatch(b, -1) {
		got[string(m[1])] = true
	}
	for _, k := range want {
		if !got[k] {
			t.Errorf("%s has no %s: %s", what, k, b)
		}
		delete(got, k)
	}
	for k := range got {
		t.Errorf("%s has %s, not yet set: %s", what, k, b)
	}
}

// TestUnsetTimesLeftOut: a running turn's and process's end, and a queued turn's start, are
// left out of the tools' results; once they are set they are written in wire's layout.
func TestUnsetTimesLeftOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	s := e.subscriber(t, tok, eras[1], nil)

	se, msg := s.tool(t, "session", map[string]any{"action": "create", "name": "times", "sandbox": "box", "agent": "command"})
	if msg != "" {
		t.Fatalf("session create: %q", msg)
	}
	checkTimes(t, "a session", se, "created_at")
	turn, msg := s.tool(t, "turn", map[string]any{"action": "start", "session": "times", "prompt": "sleep 60"})
	if msg != "" {
		t.Fatalf("turn start: %q", msg)
	}
	if turn["state"] == "queued" {
		checkTimes(t, "a queued turn", turn, "created_at")
	}
	get := map[string]any{"action": "get", "session": "times", "turn_id": turn["id"]}
	var running map[string]any
	waitFor(t, "the turn to run", func() bool { running, _ = s.tool(t, "turn", get); return running["state"] == "running" })
	checkTimes(t, "a running turn", running, "created_at", "started_at")
	if _, msg := s.tool(t, "turn", map[string]any{"action": "cancel", "session": "times", "turn_id": turn["id"]}); msg != "" {
		t.Fatalf("turn cancel: %q", msg)
	}
	var ended map[string]any
	waitFor(t, "the turn to end", func() bool { ended, _ = s.tool(t, "turn", get); return ended["state"] == "cancelled" })
	checkTimes(t, "an ended turn", ended, "created_at", "started_at", "ended_at")

	pr, msg := s.tool(t, "process", map[string]any{"action": "start", "sandbox": "box", "command": "sleep 60"})
	if msg != "" {
		t.Fatalf("process start: %q", msg)
	}
	checkTimes(t, "a running process", pr, "started_at")
	killed, msg := s.tool(t, "process", map[string]any{"action": "kill", "sandbox": "box", "process_id": pr["process_id"]})
	if msg != "" {
		t.Fatalf("process kill: %q", msg)
	}
	if killed["state"] == "running" {
		checkTimes(t, "a process being killed", killed, "started_at")
	}
	list := map[string]any{"action": "list", "sandbox": "box"}
	var ps []any
	waitFor(t, "the process to end", func() bool {
		got, _ := s.tool(t, "process", list)
		ps, _ = got["processes"].([]any)
		return len(ps) == 1 && ps[0].(map[string]any)["state"] != "running"
	})
	checkTimes(t, "an ended process", ps[0].(map[string]any), "started_at", "ended_at")
}
