package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/wire"
)

// TestEventLines: the lines a person needs read as one line each — a run's start, an API
// retry, Codex's errors, a failed turn with its reason — and the rest of Claude Code's system
// lines say nothing.
func TestEventLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, typ, data string
		want            []string
	}{
		{"init", "system", `{"type":"system","subtype":"init","cwd":"/work/repo","session_id":"s","model":"claude-sonnet-5","tools":["Bash"]}`,
			[]string{"run started: model claude-sonnet-5, in /work/repo"}},
		{"api_retry", "system", `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2400.5,"error_status":529,"error":"overloaded","session_id":"s","uuid":"u"}`,
			[]string{"API call failed, retry 3 of 10: overloaded (HTTP 529), in 2.4s"}},
		{"api_retry without a status", "system", `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":null,"error":"unknown"}`,
			[]string{"API call failed, retry 1 of 10: unknown, in 500ms"}},
		{"a hook", "system", `{"type":"system","subtype":"hook_started","hook_name":"x"}`, nil},
		{"codex error", "error", `{"type":"error","message":"unexpected status 400"}`, []string{"error: unexpected status 400"}},
		{"codex turn.failed", "turn.failed", `{"type":"turn.failed","error":{"message":"model not found"}}`, []string{"error: model not found"}},
		{"turn failed with its reason", "turn.finished",
			`{"type":"turn.finished","status":"failed","exit_code":1,"reason":"exit code 1: Not inside a trusted directory and --skip-git-repo-check was not specified."}`,
			[]string{"── turn failed, exit 1: Not inside a trusted directory and --skip-git-repo-check was not specified."}},
		{"turn killed", "turn.finished", `{"type":"turn.finished","status":"failed","exit_code":null,"signal":"SIGKILL","reason":"killed by SIGKILL: out of memory"}`,
			[]string{"── turn failed, signal SIGKILL: out of memory"}},
		{"turn failed, the harness's reason", "turn.finished", `{"type":"turn.finished","status":"failed","exit_code":null,"reason":"the harness ended without writing its status file"}`,
			[]string{"── turn failed: the harness ended without writing its status file"}},
	}
	p := &eventPrinter{}
	for _, c := range cases {
		got := p.lines(wire.Event{Type: c.typ, Data: json.RawMessage(c.data)})
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
