package sandboxcmd

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestEnvdTokenFlags: a malformed token hash, or a token given both ways, stops the daemon
// before it listens, with a sentence saying what is wrong.
func TestEnvdTokenFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--access-token-sha256", "abc"}, "64 hex digits"},
		{[]string{"--access-token-sha256", strings.Repeat("g", 64)}, "64 hex digits"},
		{[]string{"--access-token", "tok", "--access-token-sha256", strings.Repeat("a", 64)}, "not both"},
	} {
		err := Envd(context.Background(), "hangar-envd envd", append(c.args, "--listen", "127.0.0.1:0"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
