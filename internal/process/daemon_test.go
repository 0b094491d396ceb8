package process

import (
	"context"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/stream"
)

// endRecorder is an ender for a follower tested on its own: it ends pr and remembers how.
type endRecorder struct {
	pr    *proc
	mu    sync.Mutex
	calls int
	state State
	exit  *envd.Exit
}

func (e *endRecorder) end(state State, exit *envd.Exit) {
	e.mu.Lock()
	e.calls++
	e.state, e.exit = state, exit
	e.mu.Unlock()
	e.pr.end(state, exit, time.Now())
}

// TestDaemonFollower follows, on its own, a process started through a real daemon: its output
// reaches the ring and an attachment, a character split across two of the daemon's chunks
// arrives whole, and the exit is passed on once.
func TestDaemonFollower(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := h.client(t)
	argv := provider.ShellArgv(`printf 'caf\303'; sleep 0.2; printf '\251 ok\n'; exit 3`)
	sctx, scancel := context.WithCancel(ctx)
	st, err := c.Start(sctx, envd.StartRequest{Cmd: argv[0], Args: argv[1:], Envs: map[string]string{"HOME": t.TempDir()}, Tag: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	pr := newProc(1 << 10)
	pr.id, pr.sandbox, pr.tag, pr.pid = "p_1", "box", "t1", st.PID()
	sub, err := h.streams.Open(ctx, stream.Options{Kind: stream.KindProcess, Principal: ada, Sandbox: "box"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pr.subs[sub] = struct{}{}
	rec := &endRecorder{pr: pr}
	f := &daemonFollower{sbs: h.sbs, log: h.m.log, pr: pr, end: rec.end, reconnectMin: time.Millisecond, reconnectMax: time.Millisecond, clock: quartz.NewReal(),
		st: st, cancel: scancel}
	f.follow(ctx)

	if rec.calls != 1 || rec.state != StateExited || rec.exit == nil || rec.exit.Code != 3 {
		t.Fatalf("ended %d times, last %s %+v; want once, exited with 3", rec.calls, rec.state, rec.exit)
	}
	data, _, _ := pr.ring.read(0)
	if string(data) != "café ok\n" {
		t.Errorf("the ring holds %q", data)
	}
	items, _ := drainAttachment(ctx, t, &Attachment{Stream: sub, pr: pr})
	for _, it := range items {
		if !utf8.Valid(it.Data) {
			t.Errorf("an output item is not whole UTF-8: %q", it.Data)
		}
	}
}

// TestDaemonFollowerStopsWithContext: a follower whose context ends (the Manager closed)
// returns without ending the process, which runs on.
func TestDaemonFollowerStopsWithContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := h.client(t)
	argv := provider.ShellArgv("sleep 100")
	sctx, scancel := context.WithCancel(ctx)
	st, err := c.Start(sctx, envd.StartRequest{Cmd: argv[0], Args: argv[1:], Envs: map[string]string{"HOME": t.TempDir()}, Tag: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Signal(context.WithoutCancel(ctx), envd.ByTag("t2"), envd.SIGKILL)
	pr := newProc(1 << 10)
	pr.id, pr.sandbox, pr.tag, pr.pid = "p_2", "box", "t2", st.PID()
	rec := &endRecorder{pr: pr}
	f := &daemonFollower{sbs: h.sbs, log: h.m.log, pr: pr, end: rec.end, reconnectMin: time.Millisecond, reconnectMax: time.Millisecond, clock: quartz.NewReal(),
		st: st, cancel: scancel}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.follow(fctx) }()
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the follower did not return when its context ended")
	}
	if rec.calls != 0 {
		t.Errorf("the process was ended (%s) when only its follower stopped", rec.state)
	}
}

// TestFollowerReconnectsByTag: the connection to the daemon breaks while the process runs on.
// The process stays running (it is not marked exited), the follower reaches it again by its tag,
// and its output after the break arrives.
func TestFollowerReconnectsByTag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	m := h.m
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
	h.ln.cut()
	// Past what the process printed before the cut and what was in flight: new output came
	// through a new stream.
	before := waitOutput(first)
	h.ln.cut()
	waitOutput(before + 20)
	rec, err := h.st.GetProcess(ctx, info.ID)
	if err != nil || rec.State != "running" {
		t.Errorf("the record after the breaks = %+v, %v; want running", rec, err)
	}
	if _, err := m.Kill(ctx, ada, "box", info.ID); err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada, info.ID)
}
