package sandbox_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/stream/streamtest"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

// runningProvider says every sandbox runs.
type runningProvider struct{ provider.Provider }

func (runningProvider) Name() string { return "local" }
func (runningProvider) Get(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return sb, nil
}

// execEnv is a Manager whose sandbox "box" has a real daemon on a loopback port.
type execEnv struct {
	m       *sandbox.Manager
	streams *stream.Registry
}

func newExecEnv(t *testing.T) execEnv { return newExecEnvWith(t, execEnvOpts{}) }

// newExecEnvOn is newExecEnv with the Manager on clock (nil: the real one); the daemon keeps
// the real clock.
func newExecEnvOn(t *testing.T, clock quartz.Clock) execEnv {
	t.Helper()
	return newExecEnvWith(t, execEnvOpts{clock: clock})
}

// execEnvOpts change newExecEnv's: the Manager's clock and the stream registry's (nil: the
// real one), and a gate the daemon is reached through (nil: none), which holds back what
// hangar sends the daemon until it is closed.
type execEnvOpts struct {
	clock, streamClock quartz.Clock
	gate               <-chan struct{}
}

func newExecEnvWith(t *testing.T, o execEnvOpts) execEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopDaemon := context.WithCancel(context.Background())
	served := make(chan error, 1)
	// HOME is the daemon's folder, as the local provider's daemon has it: a command's login
	// shell does not read the host user's profile (on a developer's machine, a dozen processes).
	home := t.TempDir()
	go func() {
		served <- daemon.New(daemon.Config{AccessToken: "secret", Workdir: home, OwnHome: home}).Serve(dctx, ln)
	}()
	t.Cleanup(func() { stopDaemon(); <-served })
	addr := ln.Addr().String()
	if o.gate != nil {
		addr = gated(t, addr, o.gate)
	}
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: "http://" + addr, DaemonToken: "secret", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	streams := stream.New(stream.Config{Clock: o.streamClock})
	m := sandbox.New(sandbox.Config{Store: st, Streams: streams, Providers: map[string]provider.Provider{"local": runningProvider{}}, Clock: o.clock})
	t.Cleanup(m.Close)
	return execEnv{m: m, streams: streams}
}

// gated is a TCP proxy to addr that passes on what its clients send only once gate is closed
// (what comes back passes at once). It stops with the test.
func gated(t *testing.T, addr string, gate <-chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, d)
			mu.Unlock()
			wg.Go(func() { io.Copy(c, d); c.Close() })
			wg.Go(func() {
				select {
				case <-gate:
					io.Copy(d, c)
				case <-stop:
				}
				d.Close()
			})
		}
	})
	return ln.Addr().String()
}

// output is a streamed exec's writer, as a transport's: it keeps the output and the
// goroutines that wrote it, and calls stop (when set) once output arrived.
type output struct {
	out     []byte
	writers map[int]bool
	stop    func()
}

func (o *output) write(items []stream.Item) error {
	if o.writers == nil {
		o.writers = map[int]bool{}
	}
	o.writers[streamtest.Goroutine()] = true
	for _, it := range items {
		o.out = append(o.out, it.Data...)
	}
	if o.stop != nil && len(o.out) > 0 {
		o.stop()
		o.stop = nil
	}
	return nil
}

func TestStreamExecRunsToItsEnd(t *testing.T) {
	t.Parallel()
	e := newExecEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ex, err := e.m.StreamExec(ctx, ada, "box", sandbox.ExecRequest{Command: "echo hi; echo oops >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	began := false
	rec := &output{}
	o, err := ex.Run(ctx, 0, func() error { began = len(rec.out) == 0; return nil }, rec.write)
	if err != nil {
		t.Fatal(err)
	}
	if !began {
		t.Error("begin was not called before the output")
	}
	// The command's output was read and written by Run's caller: a streamed exec has no
	// goroutine of its own.
	if me := streamtest.Goroutine(); len(rec.writers) != 1 || !rec.writers[me] {
		t.Errorf("the output was written by goroutines %v, want only Run's caller %d", rec.writers, me)
	}
	if out := string(rec.out); out != "hi\noops\n" && out != "oops\nhi\n" {
		t.Errorf("streamed %q, want hi and oops", out)
	}
	if !o.Ended || o.Result.ExitCode != 3 || o.Closed != "" || !o.Result.Streamed || string(o.Result.Stdout) != "hi\n" {
		t.Errorf("outcome %+v, want ended with exit code 3, streamed, stdout hi", o)
	}
	if total, _ := e.streams.Count(""); total != 0 {
		t.Errorf("%d streams still open after Run, want 0", total)
	}
}

// TestStreamExecEndings: how the stream ended decides the command's fate, the same for every
// transport.
func TestStreamExecEndings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		end       func(e execEnv)
		wantErr   error
		wantClose stream.Reason
		detached  bool
		status    string
	}{
		{name: "revoked", end: func(e execEnv) { e.streams.EndToken(ada.TokenID) }, wantClose: stream.ReasonRevoked,
			status: "killed: the stream's token was revoked or expired"},
		{name: "shutdown", end: func(e execEnv) { e.streams.Shutdown() }, wantClose: stream.ReasonShutdown, detached: true},
		{name: "destroyed", end: func(e execEnv) { e.streams.EndSandbox("box", stream.ReasonDestroyed) }, wantClose: stream.ReasonDestroyed, detached: true},
		{name: "client", end: func(e execEnv) { e.streams.EndKind(stream.KindExec, stream.ReasonClient) }, wantErr: sandbox.ErrClientGone},
		{name: "slow", end: func(e execEnv) { e.streams.EndKind(stream.KindExec, stream.ReasonSlow) }, wantErr: sandbox.ErrClientGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newExecEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			ex, err := e.m.StreamExec(ctx, ada, "box", sandbox.ExecRequest{Command: "echo started; exec sleep 600"})
			if err != nil {
				t.Fatal(err)
			}
			rec := &output{stop: func() { tc.end(e) }}
			o, err := ex.Run(ctx, 0, nil, rec.write)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if out := string(rec.out); out != "started\n" || string(o.Result.Stdout) != "started\n" {
				t.Errorf("streamed %q, result's stdout %q, want started", out, o.Result.Stdout)
			}
			if o.Ended || o.Closed != tc.wantClose || o.Result.Detached != tc.detached {
				t.Errorf("outcome %+v, want not ended, closed %s, detached %v", o, tc.wantClose, tc.detached)
			}
			if tc.status != "" && o.Result.Status != tc.status {
				t.Errorf("status %q, want %q", o.Result.Status, tc.status)
			}
		})
	}
}

// TestStreamExecClientGoesWhileItRunsOn: a stream that ended for a reason that neither kills
// nor lets go of its command (here its lifetime) waits for the command; a client that goes
// meanwhile kills it, rather than waiting for a command nobody will hear from.
func TestStreamExecClientGoesWhileItRunsOn(t *testing.T) {
	t.Parallel()
	e := newExecEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ex, err := e.m.StreamExec(ctx, ada, "box", sandbox.ExecRequest{Command: "echo started; exec sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	gone, leave := context.WithCancel(ctx)
	defer leave()
	rec := &output{stop: func() { e.streams.EndKind(stream.KindExec, stream.ReasonLifetime); leave() }}
	if _, err := ex.Run(gone, 0, nil, rec.write); !errors.Is(err, sandbox.ErrClientGone) {
		t.Fatalf("Run: %v, want ErrClientGone", err)
	}
}

// TestStreamExecThatDoesNotStart: a command the daemon cannot start is Run's error, before
// begin (so the transport can answer with a status of its own), and its stream ends as the
// producer's failure.
// TestStreamExecNoKeepAliveBeforeStart: while the daemon has yet to start the command (slow
// under load), a keep-alive that falls due writes nothing: it would be the client's first
// bytes, an answer of 200 before the command started. When the command then fails to start,
// Run returns its error with nothing written, for the transport to answer with its status.
func TestStreamExecNoKeepAliveBeforeStart(t *testing.T) {
	t.Parallel()
	mClock := quartz.NewMock(t)
	gate := make(chan struct{})
	e := newExecEnvWith(t, execEnvOpts{streamClock: mClock, gate: gate})
	trap := mClock.Trap().AfterFunc("stream", "keep-alive")
	defer trap.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ex, err := e.m.StreamExec(ctx, ada, "box", sandbox.ExecRequest{Command: "echo hi", Cwd: "/no/such/dir"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := 0
	done := make(chan error, 1)
	go func() {
		_, err := ex.Run(ctx, time.Second, nil, func(items []stream.Item) error {
			mu.Lock()
			writes++
			mu.Unlock()
			return nil
		})
		done <- err
	}()
	trap.MustWait(ctx).MustRelease(ctx)
	mClock.Advance(time.Second).MustWait(ctx) // due while the daemon has not seen the start
	close(gate)
	err = <-done
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(err, sandbox.ErrInvalid) || writes != 0 {
		t.Fatalf("Run = %v after %d writes; want ErrInvalid after none", err, writes)
	}
}

func TestStreamExecThatDoesNotStart(t *testing.T) {
	t.Parallel()
	e := newExecEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ex, err := e.m.StreamExec(ctx, ada, "box", sandbox.ExecRequest{Command: "echo hi", Cwd: "/no/such/dir"})
	if err != nil {
		t.Fatal(err)
	}
	began := false
	_, err = ex.Run(ctx, 0, func() error { began = true; return nil }, (&output{}).write)
	if !errors.Is(err, sandbox.ErrInvalid) || began {
		t.Fatalf("Run = %v with begin called %v; want ErrInvalid, before begin", err, began)
	}
	if r := ex.Stream.Reason(); r != stream.ReasonError {
		t.Errorf("the stream ended %q, want %q", r, stream.ReasonError)
	}
	if total, _ := e.streams.Count(""); total != 0 {
		t.Errorf("%d streams still open after Run, want 0", total)
	}
}
