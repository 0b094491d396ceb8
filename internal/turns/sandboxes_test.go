package turns

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
)

// TestHarnessBinaries: where the provider put hangar-envd (Data["harness"], as E2B's upload says)
// comes first; else local runs the host's and Docker the mounted one; else there is none.
func TestHarnessBinaries(t *testing.T) {
	t.Parallel()
	bin := HarnessBinaries("/usr/bin/hangar-envd")
	for _, c := range []struct {
		sb   store.Sandbox
		want string
	}{
		{store.Sandbox{Provider: "e2b", Data: map[string]string{"harness": "/opt/hangar/bin/hangar"}}, "/opt/hangar/bin/hangar"},
		{store.Sandbox{Provider: "e2b"}, ""},
		{store.Sandbox{Provider: "local"}, "/usr/bin/hangar-envd"},
		{store.Sandbox{Provider: "docker"}, "/opt/hangar/bin/hangar-envd"},
	} {
		if got := bin(c.sb); got != c.want {
			t.Errorf("HarnessBinaries(%s, %v) = %q, want %q", c.sb.Provider, c.sb.Data, got, c.want)
		}
	}
}
