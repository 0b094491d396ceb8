package cli_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestProcesses: start prints the id, ps lists it, attach replays what is kept and exits with
// the process's code, kill ends one.
func TestProcesses(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "proc-box")
	env := s.env(t)
	id := strings.TrimSpace(hangar(t, env, "", "start", "proc-box", "--", "echo one; echo two; exit 5").want(t, 0).stdout)
	if !strings.HasPrefix(id, "p_") {
		t.Fatalf("start printed %q, want a process id", id)
	}
	r := hangar(t, env, "", "attach", "proc-box", id).want(t, 5)
	if r.stdout != "one\ntwo\n" {
		t.Errorf("attach = %q, want the process's output", r.stdout)
	}
	if r := hangar(t, env, "", "attach", "--since", "4", "proc-box", id).want(t, 5); r.stdout != "two\n" {
		t.Errorf("attach --since 4 = %q, want what came after offset 4", r.stdout)
	}
	if r := hangar(t, env, "", "attach", "--since", "1h", "proc-box", id).want(t, 5); r.stdout != "one\ntwo\n" {
		t.Errorf("attach --since 1h = %q, want all it printed (in the last hour)", r.stdout)
	}
	for tail, want := range map[string]string{"0": "", "1": "two\n", "2": "one\ntwo\n", "9": "one\ntwo\n"} {
		if r := hangar(t, env, "", "attach", "--tail", tail, "proc-box", id).want(t, 5); r.stdout != want {
			t.Errorf("attach --tail %s = %q, want %q", tail, r.stdout, want)
		}
	}
	for _, bad := range [][]string{{"--since", "4", "--tail", "1"}, {"--since", "ten"}, {"--since", "-1"}, {"--since", "-5m"}} {
		if r := hangar(t, env, "", append(append([]string{"attach"}, bad...), "proc-box", id)...).want(t, 2); !strings.Contains(r.stderr, "--since") {
			t.Errorf("attach %v: %q, want a sentence about --since", bad, r.stderr)
		}
	}

	sleeper := strings.TrimSpace(hangar(t, env, "", "start", "proc-box", "--", "sleep 300").want(t, 0).stdout)
	var ps struct {
		Processes []map[string]any `json:"processes"`
	}
	r = hangar(t, env, "", "ps", "proc-box", "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("ps -o json = %q: %v", r.stdout, err)
	}
	listed := map[any]bool{}
	for _, p := range ps.Processes {
		listed[p["process_id"]] = true
	}
	if !listed[id] || !listed[sleeper] {
		t.Errorf("ps -o json = %q, want %s and %s", r.stdout, id, sleeper)
	}
	if r := hangar(t, env, "", "ps", "proc-box").want(t, 0); !strings.Contains(r.stdout, sleeper) || !strings.Contains(r.stdout, "sleep 300") {
		t.Errorf("ps = %q", r.stdout)
	}
	if r := hangar(t, env, "", "__complete", "attach", "proc-box", "").want(t, 0); !strings.Contains(r.stdout, sleeper+"\tsleep 300") {
		t.Errorf("completing attach's process id = %q, want the running process", r.stdout)
	}
	if r := hangar(t, env, "", "__complete", "attach", "").want(t, 0); !strings.Contains(r.stdout, "proc-box\n") {
		t.Errorf("completing attach's sandbox = %q", r.stdout)
	}
	hangar(t, env, "", "kill", "proc-box", sleeper).want(t, 0)
	r = hangar(t, env, "", "attach", "proc-box", sleeper).want(t, 1)
	if !strings.Contains(r.stderr, "signal") {
		t.Errorf("attach to a killed process: stderr %q, want how it ended", r.stderr)
	}
	if r := hangar(t, env, "", "attach", "proc-box", "p_nosuch").want(t, 1); !strings.Contains(r.stderr, "no such process") {
		t.Errorf("attach to an unknown process: %q", r.stderr)
	}
}

// TestAttachResumesAfterRestart: attach follows a process across a restart of hangar: it
// reconnects, sees hangar adopted the process with offsets from 0 again, and goes on with its
// new output, nothing repeated, nothing printed after the restart lost.
func TestAttachResumesAfterRestart(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "hangar-cli-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := newServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	s.sandbox(t, "restart-box")
	id := s.api(t, "POST", "/api/sandboxes/restart-box/processes", `{"command": "echo one; read x; echo two; read y; echo three"}`)["process_id"].(string)
	b := startHangar(t, s.env(t), "attach", "restart-box", id)
	if l := b.line(t); l != "one\n" {
		t.Fatalf("first line %q", l)
	}
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	input := func(body string) {
		req, _ := http.NewRequest("POST", s.url+"/api/sandboxes/restart-box/processes/"+id+"/input", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.admin)
		r, err := http.DefaultClient.Do(req)
		if err != nil || r.StatusCode != http.StatusNoContent {
			t.Fatalf("input after the restart: %v %v", r, err)
		}
		r.Body.Close()
	}
	input(`{"input": "\n"}`)
	if l := b.line(t); l != "two\n" {
		t.Fatalf("the line after the restart = %q, want two\nstderr: %s", l, b.stderr.String())
	}
	input(`{"input": "\n"}`)
	if rest := b.rest(t); rest != "three\n" {
		t.Errorf("the rest = %q, want three", rest)
	}
	if code := b.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0; stderr %s", code, b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "restarted") {
		t.Errorf("stderr = %q, want a note that hangar restarted", b.stderr.String())
	}
}
