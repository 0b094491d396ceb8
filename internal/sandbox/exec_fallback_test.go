package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// TestExecFallback: a sandbox without a daemon runs a command with its provider's exec, and says
// so; a command killed at its timeout reads -1 whichever way it ran; a provider that does not
// answer is ErrUnavailable; a bad request or a paused sandbox reaches no provider.
func TestExecFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	mustCreate(t, m, ada, "plain")

	f.mu.Lock()
	f.execRes = provider.ExecResult{ExitCode: 3, Stdout: []byte("out"), Stderr: []byte("err")}
	f.mu.Unlock()
	res, err := m.Exec(ctx, ada, "plain", sandbox.ExecRequest{Command: "false"})
	if err != nil || res.Via != "provider" || res.ExitCode != 3 || res.Status != "exit status 3" || string(res.Stdout) != "out" || string(res.Stderr) != "err" {
		t.Fatalf("Exec = %+v, %v; want exit 3 via the provider", res, err)
	}

	f.mu.Lock()
	f.execRes = provider.ExecResult{ExitCode: 137, TimedOut: true}
	f.mu.Unlock()
	if res, err := m.Exec(ctx, ada, "plain", sandbox.ExecRequest{Command: "sleep 9"}); err != nil || !res.TimedOut || res.ExitCode != -1 {
		t.Errorf("Exec that timed out = %+v, %v; want exit -1, timed out", res, err)
	}

	if _, err := m.Exec(ctx, bob, "plain", sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's Exec in ada's sandbox = %v, want ErrNotFound", err)
	}
	if _, err := m.Exec(ctx, ada, "plain", sandbox.ExecRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Exec of nothing = %v, want ErrInvalid", err)
	}
	if _, err := m.Pause(ctx, ada, "plain"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
	if _, err := m.Exec(ctx, ada, "plain", sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Exec in a paused sandbox = %v, want ErrState", err)
	}
	if f.called("Exec", "plain") {
		t.Error("Exec in a paused sandbox reached the provider")
	}
	if _, err := m.Resume(ctx, ada, "plain"); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	f.mu.Lock()
	f.fail["Exec"] = provider.ErrUnavailable
	f.mu.Unlock()
	if _, err := m.Exec(ctx, ada, "plain", sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec with the provider down = %v, want ErrUnavailable", err)
	}
}
