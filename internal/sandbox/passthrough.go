package sandbox

import (
	"context"
	"net/http"
	"net/url"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/store"
)

// DaemonPassthrough returns what passes HTTP requests on to the sandbox's daemon as they are
// (envd.Client.Passthrough): its base URL and a RoundTripper that sends the daemon's own access
// token. It fails with ErrState when the sandbox has no daemon.
func (m *Manager) DaemonPassthrough(sb store.Sandbox) (*url.URL, http.RoundTripper, error) {
	c, err := m.Daemon(sb)
	if err != nil {
		return nil, nil, err
	}
	return c.Passthrough()
}

// KillDaemonProcess kills the process pid in the sandbox's daemon (SIGKILL; hangar's daemon
// kills its whole process group): a command an E2B SDK started through the pass-through, whose
// token was revoked, ends as a streamed command of that token would.
func (m *Manager) KillDaemonProcess(ctx context.Context, sb store.Sandbox, pid uint32) error {
	c, err := m.Daemon(sb)
	if err != nil {
		return err
	}
	return c.Signal(ctx, envd.ByPID(pid), envd.SIGKILL)
}
