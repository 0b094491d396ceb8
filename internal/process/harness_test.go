package process

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

// The tokens of these tests: two of ada's, and an admin.
var (
	ada   = auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	ada2  = auth.Principal{TokenID: "tok_ada2", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	admin = auth.Principal{TokenID: "tok_root", User: "root", Scopes: []auth.Scope{auth.ScopeAdmin}}
)

// cutListener is a listener whose accepted connections can all be cut at once: a network that
// breaks between hangar and a daemon that keeps running.
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// runningProvider says every sandbox runs, and runs a provider's exec on this machine with
// home as $HOME.
type runningProvider struct {
	provider.Provider
	home string
}

func (p runningProvider) Exec(ctx context.Context, _ provider.Sandbox, req provider.ExecRequest) (provider.ExecResult, error) {
	res, err := localExec(p.home)(ctx, req.Command)
	return provider.ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}, err
}

func (runningProvider) Name() string { return "local" }
func (runningProvider) Get(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return sb, nil
}

// harness is a Manager over a real in-process daemon serving the sandbox "box", owned by ada,
// with its records in SQLite; ada's sandbox "plain" has no daemon and runs on this machine.
type harness struct {
	m       *Manager
	ln      *cutListener // the daemon's
	url     string       // the daemon's
	st      store.Store
	sbs     *sandbox.Manager
	streams *stream.Registry
}

// startDaemon serves a daemon on a loopback port until the test ends.
func startDaemon(t *testing.T) (*cutListener, string) {
	t.Helper()
	dctx, stop := context.WithCancel(context.Background())
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &cutListener{Listener: raw}
	served := make(chan error, 1)
	go func() {
		served <- daemon.New(daemon.Config{AccessToken: "secret", Workdir: t.TempDir()}).Serve(dctx, ln)
	}()
	t.Cleanup(func() { stop(); <-served })
	return ln, "http://" + raw.Addr().String()
}

// newHarness returns a harness whose Manager has cfg (Sandboxes, Streams, Store and Secret set
// here). It is closed when the test ends.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ln, url := startDaemon(t)
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	// A HOME of its own: the login shell that runs each command reads no profile of this
	// machine's (one that does slow work, like rehashing shims under a shared lock).
	env := map[string]string{"HOME": t.TempDir()}
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: url, DaemonToken: "secret", Env: env, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	// "plain" has no daemon: its processes are polled.
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "plain", Owner: "ada", Provider: "local", State: "running",
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	sbs := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": runningProvider{home: env["HOME"]}}})
	t.Cleanup(sbs.Close)
	streams := stream.New(stream.Config{})
	cfg.Sandboxes, cfg.Streams, cfg.Store, cfg.Secret = sbs, streams, st, []byte(strings.Repeat("k", 32))
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Shutdown(); m.Close() })
	return &harness{m: m, ln: ln, url: url, st: st, sbs: sbs, streams: streams}
}

// client is a client of the harness's daemon.
func (h *harness) client(t *testing.T) *envd.Client {
	t.Helper()
	c, err := envd.New(envd.Config{URL: h.url, AccessToken: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitEnd waits until p's process id is no longer running and returns it.
func (h *harness) waitEnd(ctx context.Context, t *testing.T, p auth.Principal, id string) Info {
	t.Helper()
	return h.waitEndIn(ctx, t, p, "box", id)
}

// waitEndIn waits until p's process id in sandbox sb is no longer running and returns it.
func (h *harness) waitEndIn(ctx context.Context, t *testing.T, p auth.Principal, sb, id string) Info {
	t.Helper()
	for {
		i, err := h.m.Get(ctx, p, sb, id)
		if err != nil {
			t.Fatal(err)
		}
		if i.State != StateRunning {
			return i
		}
		if ctx.Err() != nil {
			t.Fatalf("process %s still runs", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drainAttachment reads a's stream to its end and returns the output and the end item's data.
func drainAttachment(ctx context.Context, t *testing.T, a *Attachment) (out []stream.Item, end []byte) {
	t.Helper()
	for {
		items, err := a.Stream.Next(ctx, 0)
		if err != nil {
			return out, end
		}
		for _, it := range items {
			switch it.Event {
			case EventOutput:
				out = append(out, it)
			case EventEnd:
				end = it.Data
			}
		}
	}
}

// envdByTag selects the daemon's process of hangar's process id.
func envdByTag(h *harness, id string) envd.Selector {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return envd.ByTag(h.m.procs[id].tag)
}

// waitRecordEnded waits until the record of process id says it ended (it is written just
// after the process ends).
func (h *harness) waitRecordEnded(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	for {
		rec, err := h.st.GetProcess(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != "running" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the end of process %s was not recorded", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
