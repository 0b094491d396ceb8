package sandbox

import (
	"net/http"
	"net/url"

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
