package sandbox_test

import (
	"context"
	"errors"
	"net"
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

func newExecEnv(t *testing.T) execEnv { return newExecEnvOn(t, nil) }

// newExecEnvOn is newExecEnv with the Manager on clock (nil: the real one); the daemon keeps
// the real clock.
func newExecEnvOn(t *testing.T, clock quartz.Clock) execEnv {
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
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: "http://" + ln.Addr().String(), DaemonToken: "secret", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	streams := stream.New(stream.Config{})
	m := sandbox.New(sandbox.Config{Store: st, Streams: streams, Providers: map[string]provider.Provider{"local": runningProvider{}}, Clock: clock})
	t.Cleanup(m.Close)
	return execEnv{m: m, streams: streams}
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
