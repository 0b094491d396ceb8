package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

var (
	ada   = auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	ada2  = auth.Principal{TokenID: "tok_ada2", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	bob   = auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
	admin = auth.Principal{TokenID: "tok_root", User: "root", Scopes: []auth.Scope{auth.ScopeAdmin}}
)

// runningProvider says every sandbox runs.
type runningProvider struct{ provider.Provider }

func (runningProvider) Name() string { return "local" }
func (runningProvider) Get(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return sb, nil
}

// env is a Service over a real in-process daemon serving ada's sandbox "box", whose workdir
// is dir; ada's "plain" has no daemon.
type env struct {
	s       *Service
	streams *stream.Registry
	dir     string
}

func newEnv(t *testing.T, cfg Config) *env { return newEnvDaemon(t, cfg, daemon.Config{}) }

// newEnvDaemon is newEnv with the daemon's own settings (its AccessToken and Workdir are set
// here).
func newEnvDaemon(t *testing.T, cfg Config, dcfg daemon.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	dcfg.AccessToken, dcfg.Workdir = "secret", dir
	go func() { served <- daemon.New(dcfg).Serve(dctx, ln) }()
	t.Cleanup(func() { stop(); <-served })
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	for _, sb := range []store.Sandbox{
		{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true, Workdir: dir,
			DaemonURL: "http://" + ln.Addr().String(), DaemonToken: "secret", CreatedAt: now, UpdatedAt: now},
		{Name: "plain", Owner: "ada", Provider: "local", State: "running", Workdir: dir, CreatedAt: now, UpdatedAt: now},
	} {
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	sbs := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": runningProvider{}}})
	t.Cleanup(sbs.Close)
	streams := stream.New(stream.Config{})
	cfg.Sandboxes, cfg.Streams = sbs, streams
	s := New(cfg)
	t.Cleanup(func() { streams.Shutdown(); s.Close() })
	return &env{s: s, streams: streams, dir: dir}
}

// waitEvents waits until w has had n events past since (some may no longer be kept) and
// returns those it read.
func waitEvents(ctx context.Context, t *testing.T, w *Watch, since int64, n int) []Event {
	t.Helper()
	var got []Event
	for last := since; ; {
		changed := w.Changed()
		evs, next, _ := w.Read(last)
		got, last = append(got, evs...), next
		if last >= since+int64(n) {
			return got
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("events up to seq %d, want %d: %+v", last, since+int64(n), got)
		}
	}
}

// TestReadSince: changes are numbered from 1 in order, and since reads only newer ones.
func TestReadSince(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w, err := e.s.Open(ctx, ada, "box", ".", false) // relative: the workdir
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Dir != e.dir {
		t.Errorf("watching %s, want the workdir %s", w.Dir, e.dir)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	evs := waitEvents(ctx, t, w, 0, 1)
	if evs[0].Seq != 1 || evs[0].Name != "one" || evs[0].Type != "create" {
		t.Errorf("first event %+v, want seq 1, create one", evs[0])
	}
	if err := os.Remove(filepath.Join(e.dir, "one")); err != nil {
		t.Fatal(err)
	}
	evs = waitEvents(ctx, t, w, 1, 1)
	if evs[0].Seq != 2 || evs[0].Name != "one" || evs[0].Type != "remove" {
		t.Errorf("after since=1: %+v, want seq 2, remove one", evs)
	}
	b, _ := json.Marshal(evs[0])
	if !strings.Contains(string(b), `"seq":2,"ts":"`) || !strings.Contains(string(b), `Z","name":"one","type":"remove"}`) {
		t.Errorf("event JSON %s", b)
	}
}

// TestKeepAndGap: past Keep events the oldest go; a reader behind them is told what it missed,
// and a position past the latest (an earlier watch's) reads from the start.
func TestKeepAndGap(t *testing.T) {
	e := newEnv(t, Config{Keep: 3})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w, err := e.s.Open(ctx, ada, "box", e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if err := os.Mkdir(filepath.Join(e.dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	waitEvents(ctx, t, w, 0, 5)
	evs, next, gap := w.Read(1)
	if gap == nil || *gap != (Gap{From: 2, To: 2}) || len(evs) != 3 || evs[0].Name != "c" || next != 5 {
		t.Errorf("Read(1) = %+v, %d, %+v; want c..e, next 5, gap 2..2", evs, next, gap)
	}
	if evs, next, gap := w.Read(5); len(evs) != 0 || next != 5 || gap != nil {
		t.Errorf("Read(5) = %+v, %d, %+v; want nothing new", evs, next, gap)
	}
	if evs, _, gap := w.Read(99); len(evs) != 3 || gap == nil || *gap != (Gap{From: 1, To: 2}) {
		t.Errorf("Read(99) = %+v, %+v; want all kept, gap 1..2", evs, gap)
	}
}

// TestWatchesPerGrant: the access tokens one OAuth grant issued (a new one at each refresh)
// hold MaxPerToken watches together.
func TestWatchesPerGrant(t *testing.T) {
	e := newEnv(t, Config{MaxPerToken: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	refreshed := func(tok string) auth.Principal {
		p := ada
		p.TokenID, p.Grant = tok, "gr_1"
		return p
	}
	w, err := e.s.Open(ctx, refreshed("tok_g1"), "box", e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var le *stream.LimitError
	if _, err := e.s.Open(ctx, refreshed("tok_g2"), "box", e.dir, false); !errors.As(err, &le) || le.Setting != LimitSetting {
		t.Errorf("a second watch of the grant, through its refreshed token: %v, want the %s limit", err, LimitSetting)
	}
}

// TestShared: watches of one directory share one daemon watch, stopped when the last leaves;
// each token holds at most MaxPerToken.
func TestShared(t *testing.T) {
	e := newEnv(t, Config{MaxPerToken: 2})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w1, err := e.s.Open(ctx, ada, "box", e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := e.s.Open(ctx, ada, "box", e.dir+"/", false)
	if err != nil {
		t.Fatal(err)
	}
	if tok, daemons := e.s.Held(ada.TokenID); tok != 2 || daemons != 1 {
		t.Errorf("two watches of one directory: %d held, %d daemon watches; want 2, 1", tok, daemons)
	}
	var le *stream.LimitError
	if _, err := e.s.Open(ctx, ada, "box", e.dir, true); !errors.As(err, &le) || le.Setting != LimitSetting {
		t.Errorf("a third watch: %v, want the %s limit", err, LimitSetting)
	} else if want := "this token already has 2 watches open, the most it may (HANGAR_WATCH_MAX_PER_TOKEN); close one first"; err.Error() != want {
		t.Errorf("a third watch: %q, want %q", err, want)
	}
	w3, err := e.s.Open(ctx, ada2, "box", e.dir, true)
	if err != nil {
		t.Fatalf("another token's watch: %v", err)
	}
	if _, daemons := e.s.Held(ada2.TokenID); daemons != 2 {
		t.Errorf("a recursive watch shares the plain one: %d daemon watches, want 2", daemons)
	}
	w1.Close()
	w1.Close() // twice is once
	if tok, daemons := e.s.Held(ada.TokenID); tok != 1 || daemons != 2 {
		t.Errorf("after one left: %d held, %d daemon watches; want 1, 2", tok, daemons)
	}
	w2.Close()
	w3.Close()
	if tok, daemons := e.s.Held(ada.TokenID); tok != 0 || daemons != 0 {
		t.Errorf("after all left: %d held, %d daemon watches; want 0, 0", tok, daemons)
	}
}

// TestOpenRefused: what cannot be watched says why, and a refused watch holds nothing.
func TestOpenRefused(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	file := filepath.Join(e.dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		p       auth.Principal
		sandbox string
		dir     string
		want    error
		says    string
	}{
		{"empty path", ada, "box", "", ErrInvalid, "path must name a directory"},
		{"missing", ada, "box", "/no/such/dir", ErrInvalid, "/no/such/dir does not exist"},
		{"a file", ada, "box", file, ErrInvalid, "not a directory"},
		{"a name too long", ada, "box", "/" + strings.Repeat("n", 256), ErrInvalid, "at most 255"},
		{"no daemon", ada, "plain", e.dir, ErrNeedsDaemon, "plain"},
		{"another user's sandbox", bob, "box", e.dir, sandbox.ErrNotFound, ""},
		{"no such sandbox", ada, "nope", e.dir, sandbox.ErrNotFound, ""},
	} {
		_, err := e.s.Open(ctx, c.p, c.sandbox, c.dir, false)
		if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	if tok, daemons := e.s.Held(ada.TokenID); tok != 0 || daemons != 0 {
		t.Errorf("after refusals: %d held, %d daemon watches; want 0, 0", tok, daemons)
	}
	if _, err := e.s.Open(ctx, admin, "box", e.dir, false); err != nil {
		t.Errorf("an admin's watch: %v", err)
	}
}

// TestStream: a watch stream carries each change as an item whose ID is its seq, resumes after
// since, and ends, releasing its watch, when the sandbox is destroyed.
func TestStream(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st, err := e.s.Stream(ctx, ada, "box", e.dir, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, n := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(e.dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for len(ids) < 2 {
		items, err := st.Next(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			ids = append(ids, it.ID)
		}
	}
	if strings.Join(ids, ",") != "1,2" {
		t.Errorf("ids %v, want 1,2", ids)
	}
	again, err := e.s.Stream(ctx, ada, "box", e.dir, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	items, err := again.Next(ctx, 0)
	if err != nil || len(items) != 1 || items[0].ID != "2" {
		t.Errorf("resumed after 1: %+v, %v; want 2 only", items, err)
	}
	again.Close()
	e.streams.EndSandbox("box", stream.ReasonDestroyed)
	var ended *stream.Ended
	for {
		if _, err := st.Next(ctx, 0); err != nil {
			if !errors.As(err, &ended) || ended.Reason != stream.ReasonDestroyed {
				t.Errorf("the stream ended with %v, want destroyed", err)
			}
			break
		}
	}
	st.Close()
	for {
		if tok, _ := e.s.Held(ada.TokenID); tok == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ended streams still hold their watches")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestDaemonLimit: past the daemon's own limit of watches, a watch is refused saying so, at
// once, and holds nothing.
func TestDaemonLimit(t *testing.T) {
	e := newEnvDaemon(t, Config{MaxPerToken: 10}, daemon.Config{MaxWatchers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(e.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := e.s.Open(ctx, ada, "box", d, false)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
	}
	_, err := e.s.Open(ctx, ada, "box", ".", false)
	if !errors.Is(err, ErrDaemonLimit) || !strings.Contains(err.Error(), "2 directory watches are open already") {
		t.Errorf("a third watch: %v, want the daemon's limit", err)
	}
	if tok, daemons := e.s.Held(ada.TokenID); tok != 2 || daemons != 2 {
		t.Errorf("after the refusal: %d held, %d daemon watches; want 2, 2", tok, daemons)
	}
}
