package docker

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// noPasswdProvider is a provider whose sandboxes run NoPasswdImage (no /etc/passwd).
func noPasswdProvider(t *testing.T) *Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	img, err := dockertest.EnsureNoPasswdImage(ctx, dockertest.Client(t))
	if err != nil {
		t.Fatalf("make test image: %v", err)
	}
	return newProvider(t, providertest.UniqueName("test"), func(c *Config) { c.Image = img })
}

// TestDaemonWithoutPasswd: in an image without /etc/passwd the daemon runs commands (as uid
// 0, the container's user) and serves files.
func TestDaemonWithoutPasswd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := noPasswdProvider(t)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("nopasswd"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateRunning {
		t.Fatalf("Create: %s (%s)", sb.State, sb.Reason)
	}
	c, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `echo "uid=$(id -u) user=$USER"`}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer st.Close()
	var out []byte
	var exit *envd.Exit
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		out = append(out, ev.Data...)
		if ev.Kind == envd.EventEnd {
			exit = ev.Exit
		}
	}
	if exit == nil || exit.Code != 0 || string(out) != "uid=0 user=root\n" {
		t.Errorf("exec: %q, exit %+v; want uid=0 user=root, exit 0", out, exit)
	}
	if err := c.Upload(ctx, "hello.txt", strings.NewReader("hi")); err != nil {
		t.Errorf("upload: %v", err)
	}
}

// TestDaemonFailsAtStart: a daemon that cannot serve (here its default user does not exist)
// exits at start, and Create gives a failed sandbox whose reason says why.
func TestDaemonFailsAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := noPasswdProvider(t)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("badstart"), Daemon: true,
		Env: map[string]string{"HANGAR_ENVD_USER": "nosuchuser"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateFailed || !strings.Contains(sb.Reason, `unknown user "nosuchuser"`) {
		t.Errorf("Create: %s (%s), want failed naming the unknown user", sb.State, sb.Reason)
	}
}
