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
	// Each running process holds three of the daemon's descriptors (its stdout, stderr and
	// stdin pipes): starting more fills them, and the start that finds none is refused.
	var refused response
	for i := 0; i < 40 && refused.status == 0; i++ {
		switch r := e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "sleep 300"}`); r.status {
		case http.StatusCreated:
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
	wantExhausted("exec", e.exec(t, e.admin, "box", execBody("echo hi")))
	_, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo hi"))
	wantExhausted("exec/stream", r)
}
