package turns

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
)

// commandTimeout bounds each short command a turn runs in its sandbox (start the harness, read
// the run log, cancel).
const commandTimeout = 2 * time.Minute

// FromManager makes the sandbox domain's Manager the turns' Sandboxes: visibility through its
// Get, commands through its exec (the daemon's, or the provider's without one).
func FromManager(m *sandbox.Manager) Sandboxes { return managerSandboxes{m} }

type managerSandboxes struct{ m *sandbox.Manager }

func (ms managerSandboxes) Get(ctx context.Context, p auth.Principal, ref string) (store.Sandbox, error) {
	return ms.m.Get(ctx, p, ref)
}

func (ms managerSandboxes) Create(ctx context.Context, p auth.Principal, req sandbox.CreateRequest) (string, error) {
	sb, err := ms.m.Create(ctx, p, req)
	return sb.Name, err
}

func (ms managerSandboxes) Follow(ctx context.Context, sb store.Sandbox, command string, out func(stream string, data []byte)) error {
	if sb.DaemonURL == "" {
		return ErrCannotFollow
	}
	_, err := ms.m.ExecStream(ctx, sb, sandbox.ExecRequest{Command: command}, out)
	return err
}

func (ms managerSandboxes) Run(ctx context.Context, sb store.Sandbox, command string, env map[string]string) ([]byte, int, error) {
	res, err := ms.m.ExecStream(ctx, sb, sandbox.ExecRequest{Command: command, Env: env, Timeout: commandTimeout}, nil)
	if err != nil {
		return nil, 0, err
	}
	return res.Stdout, res.ExitCode, nil
}

// HarnessBinaries says where hangar-envd, which runs the harness, is inside a sandbox: where
// its provider says it put it (Data["harness"]: E2B uploads it, a Kubernetes pod with a daemon
// has it copied in by its init container), else by provider: local sandboxes run the host's
// (host), Docker containers the one mounted at /opt/hangar/bin/hangar-envd (every container
// has it). Otherwise "": the sandbox cannot run turns.
func HarnessBinaries(host string) func(store.Sandbox) string {
	return func(sb store.Sandbox) string {
		if h := sb.Data["harness"]; h != "" {
			return h
		}
		switch sb.Provider {
		case "local":
			return host
		case "docker":
			return "/opt/hangar/bin/hangar-envd"
		}
		return ""
	}
}
