package rest_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonOutOfDescriptors: a sandbox's daemon that runs out of file descriptors (a real
// hangar-envd under a low RLIMIT_NOFILE, filled by the background processes it holds pipes
// for) makes a process start, an exec and a streamed exec 503 with Retry-After and a sentence
// that says what is missing — not 400 "not valid" (the daemon called every failed start
// InvalidArgument) nor 500 (a pipe it could not make was Internal).
func TestDaemonOutOfDescriptors(t *testing.T) {
	t.Parallel()
	wrapper := filepath.Join(t.TempDir(), "hangar-envd")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n 48 || exit 1\nexec %q \"$@\"\n", hangarBin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(e *env) { e.envdBin, e.maxProcs, e.maxStreams = wrapper, 40, 64 })
	e.sandbox(t, e.admin, "box", "")
	// The first process echoes what it is sent: it must go on doing so once the daemon is full.
	echo := e.startProcess(t, e.admin, "box", "echo ready; while read line; do echo got: $line; done")
	first, _ := e.attach(t, e.admin, "box", echo, "", "")
	first.until(t, "output")
	// Each running process holds three of the daemon's descriptors (its stdout, stderr and
	// stdin pipes): starting more fills them, and the start that finds none is refused.
	var (
		refused response
		sleeper string
	)
	for i := 0; i < 40 && refused.status == 0; i++ {
		switch r := e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "sleep 300"}`); r.status {
		case http.StatusCreated:
			sleeper = r.body["process_id"].(string)
		default:
			refused = r
		}
	}
	wantExhausted := func(what string, r response) {
		t.Helper()
		wantError(t, r, http.StatusServiceUnavailable, "unavailable")
		msg, _ := r.body["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, "out of file descriptors") {
			t.Errorf("%s: message %q, want it to say the daemon is out of file descriptors", what, msg)
		}
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", what)
		}
	}
	if refused.status == 0 {
		t.Fatal("40 processes started under a limit of 48 descriptors: none was refused")
	}
	wantExhausted("process start", refused)
	// The daemon's own words say how many processes it runs and what limit to raise.
	t.Logf("refused: %v", refused.body["error"])
	if detail, _ := refused.body["error"].(map[string]any)["detail"].(string); !strings.Contains(detail, "processes run") || !strings.Contains(detail, "RLIMIT_NOFILE") {
		t.Errorf("detail %q: want the daemon's count of processes and its RLIMIT_NOFILE", detail)
	}
	wantExhausted("exec", e.exec(t, e.admin, "box", execBody("echo hi")))
	_, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo hi"))
	wantExhausted("exec/stream", r)

	// What runs is unaffected: the first process still takes input and streams its output to
	// the stream that followed it all along and to one attached now.
	again, r := e.attach(t, e.admin, "box", echo, "", "")
	if again == nil {
		t.Fatalf("attach to a running process while the daemon is full = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "POST", "/api/sandboxes/box/processes/"+echo+"/input", e.admin, `{"input": "hello\n", "eof": true}`); r.status != http.StatusNoContent {
		t.Fatalf("input while the daemon is full = %d %s", r.status, r.raw)
	}
	for name, s := range map[string]*sseStream{"the first stream": first, "a stream attached now": again} {
		if got := output(s.until(t, "end"), "output"); !strings.HasSuffix(got, "got: hello\n") {
			t.Errorf("%s: output %q, want it to end with the echo of the input", name, got)
		}
	}
	// Once a process ends and gives its descriptors back, a start works again.
	if sleeper == "" {
		t.Fatal("no process started before the daemon was full")
	}
	if r := e.do(t, "DELETE", "/api/sandboxes/box/processes/"+sleeper, e.admin, ""); r.status != http.StatusAccepted {
		t.Fatalf("kill = %d %s", r.status, r.raw)
	}
	gone, _ := e.attach(t, e.admin, "box", sleeper, "", "")
	gone.until(t, "end")
	if r := e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "echo again"}`); r.status != http.StatusCreated {
		t.Errorf("start once a process ended = %d %s, want 201", r.status, r.raw)
	}
}
