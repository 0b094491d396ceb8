package process

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/stream"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

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

// runningProvider says every sandbox runs.
type runningProvider struct{ provider.Provider }

func (runningProvider) Name() string { return "local" }
func (runningProvider) Get(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return sb, nil
}

// TestFollowerReconnectsByTag: the connection to the daemon breaks while the process runs on.
// The process stays running (it is not marked exited), the follower reaches it again by its tag,
// and its output after the break arrives.
func TestFollowerReconnectsByTag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	dctx, stopDaemon := context.WithCancel(context.Background())
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &cutListener{Listener: raw}
	served := make(chan error, 1)
	go func() {
		served <- daemon.New(daemon.Config{AccessToken: "secret", Workdir: t.TempDir()}).Serve(dctx, ln)
	}()
	defer func() { stopDaemon(); <-served }()

	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: "http://" + raw.Addr().String(), DaemonToken: "secret", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	sbs := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": runningProvider{}}})
	defer sbs.Close()
	streams := stream.New(stream.Config{})
	m, err := New(Config{Sandboxes: sbs, Streams: streams, Store: st, Secret: []byte(strings.Repeat("k", 32)),
		ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { streams.Shutdown(); m.Close() }()

	ada := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	info, err := m.Start(ctx, ada, "box", StartRequest{Command: "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput := func(after int64) int64 {
		t.Helper()
		for {
			out, pi, err := m.Read(ctx, ada, "box", info.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if pi.State != StateRunning {
				t.Fatalf("the process is %s (%s), want running", pi.State, pi.Status)
			}
			if out.Next > after {
				return out.Next
			}
			if ctx.Err() != nil {
				t.Fatalf("no output past offset %d", after)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := waitOutput(0)
	ln.cut()
	// Past what the process printed before the cut and what was in flight: new output came
	// through a new stream.
	before := waitOutput(first)
	ln.cut()
	waitOutput(before + 20)
	rec, err := st.GetProcess(ctx, info.ID)
	if err != nil || rec.State != "running" {
		t.Errorf("the record after the breaks = %+v, %v; want running", rec, err)
	}
}
