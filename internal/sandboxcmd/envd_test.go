package sandboxcmd

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
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

// TestEnvdExitsAsSignalled: a daemon that SIGTERM stops exits 143, as a program SIGTERM ended
// (a Kubernetes pod whose daemon exited 0 on an eviction read Succeeded, without the kubelet's
// reason); one whose context is cancelled otherwise returns nil.
func TestEnvdExitsAsSignalled(t *testing.T) {
	ctx, stop := NotifyContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	err := Envd(ctx, "hangar-envd envd", []string{"--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if code, ok := err.(ExitCode); !ok || code != 143 {
		t.Errorf("Envd after SIGTERM: %v, want exit code 143", err)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Envd(cancelled, "hangar-envd envd", []string{"--listen", "127.0.0.1:0"}, io.Discard, io.Discard); err != nil {
		t.Errorf("Envd after a cancel: %v, want nil", err)
	}
}
