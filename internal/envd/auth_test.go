package envd_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// TestAuth checks that a daemon with a token refuses requests without it, except /health.
func TestAuth(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{AccessToken: "s3cret"})
	ctx := testCtx(t, shortWait)
	for _, token := range []string{"", "wrong"} {
		c := newClient(t, td, envd.Config{AccessToken: token})
		if err := c.Health(ctx); err != nil {
			t.Errorf("health needs no token: %v", err)
		}
		if _, err := c.Start(ctx, envd.StartRequest{Cmd: "true"}); !errors.Is(err, envd.ErrUnauthenticated) {
			t.Errorf("start with token %q: got %v, want ErrUnauthenticated", token, err)
		}
		if _, err := c.List(ctx); !errors.Is(err, envd.ErrUnauthenticated) {
			t.Errorf("list with token %q: got %v, want ErrUnauthenticated", token, err)
		}
		if err := c.Upload(ctx, "/tmp/x", strings.NewReader("x")); !errors.Is(err, envd.ErrUnauthenticated) {
			t.Errorf("upload with token %q: got %v, want ErrUnauthenticated", token, err)
		}
		if _, err := c.WatchDir(ctx, "/tmp", false); !errors.Is(err, envd.ErrUnauthenticated) {
			t.Errorf("watch with token %q: got %v, want ErrUnauthenticated", token, err)
		}
	}
	c := newClient(t, td, envd.Config{AccessToken: "s3cret"})
	if r := run(t, ctx, c, envd.StartRequest{Cmd: "true"}); r.exit.Code != 0 {
		t.Errorf("with the token: %+v", r.exit)
	}
}

// TestInit checks POST /init sets a token on a daemon that had none.
func TestInit(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	ctx := testCtx(t, shortWait)
	open := newClient(t, td, envd.Config{})
	if _, err := open.List(ctx); err != nil {
		t.Fatalf("no token yet: %v", err)
	}
	res, err := http.Post(td.url+"/init", "application/json", strings.NewReader(`{"accessToken":"tok","envVars":{"FROM_INIT":"yes"}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("init: %d", res.StatusCode)
	}
	if _, err := open.List(ctx); !errors.Is(err, envd.ErrUnauthenticated) {
		t.Errorf("after init without the token: got %v, want ErrUnauthenticated", err)
	}
	withToken := newClient(t, td, envd.Config{AccessToken: "tok"})
	r := run(t, ctx, withToken, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "printf %s $FROM_INIT"}})
	if string(r.stdout) != "yes" {
		t.Errorf("env from init: %q", r.stdout)
	}
	// A second init needs the token too.
	res, err = http.Post(td.url+"/init", "application/json", strings.NewReader(`{"accessToken":""}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("init without the token: %d %s", res.StatusCode, body)
	}
}

// TestUser checks the user named by basic auth: root is accepted, an unknown user refused.
func TestUser(t *testing.T) {
	t.Parallel()
	if syscall.Getuid() != 0 {
		t.Fatal("this test needs to run as root (it checks switching users); the suite runs as root")
	}
	td := startDaemon(t, tcp, daemon.Config{})
	ctx := testCtx(t, shortWait)
	root := newClient(t, td, envd.Config{User: "root"})
	r := run(t, ctx, root, envd.StartRequest{Cmd: "id", Args: []string{"-un"}})
	if strings.TrimSpace(string(r.stdout)) != "root" {
		t.Errorf("id -un: %q", r.stdout)
	}
	nobody := newClient(t, td, envd.Config{User: "nobody"})
	r = run(t, ctx, nobody, envd.StartRequest{Cmd: "id", Args: []string{"-un"}, Cwd: "/"})
	if strings.TrimSpace(string(r.stdout)) != "nobody" {
		t.Errorf("id -un as nobody: %q", r.stdout)
	}
	unknown := newClient(t, td, envd.Config{User: "no-such-user-hangar"})
	if _, err := unknown.Start(ctx, envd.StartRequest{Cmd: "true"}); !errors.Is(err, envd.ErrUnauthenticated) {
		t.Errorf("unknown user: got %v, want ErrUnauthenticated", err)
	}
}

// TestUnavailable checks a daemon that is not there is ErrUnavailable, and cancellation is
// the context's error.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, shortWait)
	c, err := envd.New(envd.Config{URL: "http://" + freeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Health(ctx); !errors.Is(err, envd.ErrUnavailable) {
		t.Errorf("health: got %v, want ErrUnavailable", err)
	}
	if _, err := c.Start(ctx, envd.StartRequest{Cmd: "true"}); !errors.Is(err, envd.ErrUnavailable) {
		t.Errorf("start: got %v, want ErrUnavailable", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.List(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
	for _, bad := range []string{"ftp://x", "unix://", "::"} {
		if _, err := envd.New(envd.Config{URL: bad}); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}

// TestShutdown checks stopping the daemon ends open streams and kills its processes.
func TestShutdown(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"300"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := int(s.PID())
	td.stop()
	for {
		ev, err := s.Next()
		if err != nil {
			break // the daemon ended the stream
		}
		if ev.Kind == envd.EventEnd {
			break
		}
	}
	if alive(pid) {
		t.Errorf("process %d survived the daemon", pid)
	}
}

// TestCancelStream checks cancelling Start's context ends the stream but not the process.
func TestCancelStream(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	sctx, cancel := context.WithCancel(ctx)
	s, err := c.Start(sctx, envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("next after cancel: got %v, want context.Canceled", err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0].Tag != "keep" {
		t.Fatalf("the process should still run: %+v %v", list, err)
	}
	if err := c.Signal(ctx, envd.ByTag("keep"), envd.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
