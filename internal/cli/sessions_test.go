package cli_test

import (
	"strings"
	"testing"
)

// TestSessionsLsStuck: sessions ls says stuck, in its STATE column, of a running session the
// fleet calls stuck (here after 1 s without an event: --stuck-after), and running before.
func TestSessionsLsStuck(t *testing.T) {
	t.Parallel()
	s, err := newServer(t.TempDir(), "--stuck-after", "1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	s.sandbox(t, "stuck-box")
	env := s.env(t)
	hangar(t, env, "", "sessions", "create", "quiet", "--sandbox", "stuck-box", "--agent", "command").want(t, 0)
	hangar(t, env, "", "sessions", "turn", "quiet", "sleep 600").want(t, 0)
	state := func() string {
		for _, line := range strings.Split(hangar(t, env, "", "sessions", "ls").want(t, 0).stdout, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "quiet" {
				return f[2]
			}
		}
		return ""
	}
	eventually(t, "the session running", func() bool { return state() == "running" || state() == "stuck" })
	eventually(t, "the session stuck, a second after its last event", func() bool { return state() == "stuck" })
}
