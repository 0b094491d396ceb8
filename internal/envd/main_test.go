package envd_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Fixed timeouts: how long a test waits for something that should happen at once, and for
// something that takes a while (16 MiB through a slow reader under -race on a shared machine).
const (
	shortWait = 10 * time.Second
	longWait  = 60 * time.Second
)

// testCtx is a context for one test, cancelled when it ends.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// network is where a test daemon listens.
type network string

const (
	tcp  network = "tcp"
	unix network = "unix"
)

var networks = []network{tcp, unix}

// testDaemon is a real daemon serving on port 0 or a unix socket.
type testDaemon struct {
	url  string
	addr string
	stop func() // stops the daemon and waits for Serve to return
}

// startDaemon serves a daemon with cfg until the test ends.
func startDaemon(t *testing.T, n network, cfg daemon.Config) *testDaemon {
	t.Helper()
	var addr string
	if n == unix {
		addr = "unix:" + filepath.Join(shortTempDir(t), "envd.sock")
	} else {
		addr = "127.0.0.1:0"
	}
	ln, err := daemon.Listen(addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	d := daemon.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	td := &testDaemon{addr: daemon.Address(ln)}
	if n == unix {
		td.url = "unix://" + ln.Addr().String()
	} else {
		td.url = "http://" + ln.Addr().String()
	}
	stopped := false
	td.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(shortWait):
			t.Errorf("the daemon did not stop within %s", shortWait)
		}
	}
	t.Cleanup(td.stop)
	return td
}

// shortTempDir is a temporary directory with a path short enough for a unix socket.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "envd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newClient returns a client of td, closed when the test ends.
func newClient(t *testing.T, td *testDaemon, cfg envd.Config) *envd.Client {
	t.Helper()
	cfg.URL = td.url
	c, err := envd.New(cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// result is everything a process stream delivered.
type result struct {
	stdout, stderr, pty []byte
	keepalives          int
	exit                *envd.Exit
}

// collect reads s to its end.
func collect(t *testing.T, s *envd.ProcessStream) result {
	t.Helper()
	var r result
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			if r.exit == nil {
				t.Fatal("the stream ended without an end event")
			}
			return r
		}
		if err != nil {
			t.Fatalf("next event: %v", err)
		}
		switch ev.Kind {
		case envd.EventStdout:
			r.stdout = append(r.stdout, ev.Data...)
		case envd.EventStderr:
			r.stderr = append(r.stderr, ev.Data...)
		case envd.EventPTY:
			r.pty = append(r.pty, ev.Data...)
		case envd.EventKeepalive:
			r.keepalives++
		case envd.EventEnd:
			r.exit = ev.Exit
		default:
			t.Fatalf("unexpected event %v", ev.Kind)
		}
	}
}

// run starts req and collects its stream.
func run(t *testing.T, ctx context.Context, c *envd.Client, req envd.StartRequest) result {
	t.Helper()
	s, err := c.Start(ctx, req)
	if err != nil {
		t.Fatalf("start %s: %v", req.Cmd, err)
	}
	defer s.Close()
	if s.PID() == 0 {
		t.Fatal("start returned pid 0")
	}
	return collect(t, s)
}

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freeAddr is a TCP address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
