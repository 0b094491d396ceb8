package process

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
)

func TestStartAttachEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat; exit 2"})
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateRunning || !info.Daemon || info.PID == 0 || info.Owner != ada.TokenID {
		t.Errorf("started: %+v", info)
	}
	a, err := h.m.Attach(ctx, ada, "box", info.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := h.m.Input(ctx, ada, "box", info.ID, []byte("hi\n"), true); err != nil {
		t.Fatal(err)
	}
	items, end := drainAttachment(ctx, t, a)
	var out string
	for _, it := range items {
		out += string(it.Data)
	}
	if out != "hi\n" || items[len(items)-1].ID != "3" {
		t.Errorf("output %q, last id %s", out, items[len(items)-1].ID)
	}
	var ended Info
	if err := json.Unmarshal(end, &ended); err != nil || ended.State != StateExited || ended.ExitCode == nil || *ended.ExitCode != 2 {
		t.Errorf("end item %s (%v)", end, err)
	}
	if got, err := h.m.Get(ctx, ada, "box", info.ID); err != nil || got.Killed {
		t.Errorf("a process that exited on its own: %+v (%v), want it not killed", got, err)
	}
	if err := h.m.Input(ctx, ada, "box", info.ID, []byte("more"), false); !errors.Is(err, ErrExited) {
		t.Errorf("input after the end: %v, want ErrExited", err)
	}
	h.waitRecordEnded(ctx, t, info.ID)
}

// TestOwnership: another token of the same user neither sees nor touches a process; an
// admin sees and kills it.
func TestOwnership(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Get(ctx, ada2, "box", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another token's Get: %v", err)
	}
	if _, err := h.m.Kill(ctx, ada2, "box", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another token's Kill: %v", err)
	}
	if _, err := h.m.Attach(ctx, ada2, "box", info.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("another token's Attach: %v", err)
	}
	if ps, err := h.m.List(ctx, ada2, "box"); err != nil || len(ps) != 0 {
		t.Errorf("another token's List: %v, %v", ps, err)
	}
	if _, ok := h.m.Locate(ada2, info.ID); ok {
		t.Error("another token locates the process")
	}
	if ps, err := h.m.List(ctx, admin, "box"); err != nil || len(ps) != 1 || ps[0].ID != info.ID {
		t.Errorf("the admin's List: %v, %v", ps, err)
	}
	if _, err := h.m.Kill(ctx, admin, "box", info.ID); err != nil {
		t.Fatal(err)
	}
	if end := h.waitEnd(ctx, t, ada, info.ID); end.State != StateExited || !end.Killed {
		t.Errorf("after the admin's kill: %+v, want it exited, killed", end)
	}
}

func TestLimitPerToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{MaxPerToken: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	first, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	var limit *LimitError
	if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "sleep 100"}); !errors.As(err, &limit) || limit.Max != 1 {
		t.Fatalf("a second start: %v, want a LimitError", err)
	}
	// Another token has its own count.
	other, err := h.m.Start(ctx, ada2, "box", StartRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada2, other.ID)
	if _, err := h.m.Kill(ctx, ada, "box", first.ID); err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada, first.ID)
	if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"}); err != nil {
		t.Errorf("a start once the first ended: %v", err)
	}
}

// TestLimitPerUser: HANGAR_BACKGROUND_MAX_PER_USER counts a user's processes through all its
// tokens, so more tokens do not make room for more.
func TestLimitPerUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{MaxPerToken: 16, MaxPerUser: 2})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	first, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Start(ctx, ada2, "box", StartRequest{Command: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []auth.Principal{ada, ada2} {
		var limit *LimitError
		_, err := h.m.Start(ctx, p, "box", StartRequest{Command: "sleep 100"})
		if !errors.As(err, &limit) || limit.User != "ada" || limit.Max != 2 || !strings.Contains(err.Error(), "HANGAR_BACKGROUND_MAX_PER_USER") {
			t.Fatalf("a third start of the user's through %s: %v, want the per-user LimitError", p.TokenID, err)
		}
	}
	// Another user has its own count.
	if _, err := h.m.Start(ctx, admin, "box", StartRequest{Command: "sleep 100"}); err != nil {
		t.Errorf("another user's start: %v", err)
	}
	if _, err := h.m.Kill(ctx, ada, "box", first.ID); err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada, first.ID)
	if _, err := h.m.Start(ctx, ada2, "box", StartRequest{Command: "true"}); err != nil {
		t.Errorf("a start once one ended: %v", err)
	}
}

// TestLimitPerGrant: the access tokens one OAuth grant issued (a new one at each refresh)
// share one HANGAR_BACKGROUND_MAX_PER_TOKEN count.
func TestLimitPerGrant(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{MaxPerToken: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	before, refreshed := ada, ada2
	before.Grant, refreshed.Grant = "gr_1", "gr_1"
	if _, err := h.m.Start(ctx, before, "box", StartRequest{Command: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	var limit *LimitError
	_, err := h.m.Start(ctx, refreshed, "box", StartRequest{Command: "sleep 100"})
	if !errors.As(err, &limit) || !limit.Grant || !strings.Contains(err.Error(), "OAuth grant") {
		t.Fatalf("a start by the grant's refreshed token: %v, want the per-token LimitError of the grant", err)
	}
	// Another grant of the same user has its own count.
	other := ada2
	other.Grant = "gr_2"
	if _, err := h.m.Start(ctx, other, "box", StartRequest{Command: "sleep 100"}); err != nil {
		t.Errorf("another grant's start: %v", err)
	}
}

// TestRetention: an ended process stays listed for Retention after its end, by the clock.
func TestRetention(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	clock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, Config{Retention: time.Minute, Clock: clock})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada, info.ID)
	// Its record says it ended too (written just after): else a Get past its retention finds
	// the record still running and follows the process again.
	h.waitRecordEnded(ctx, t, info.ID)
	clock.Advance(time.Minute - time.Millisecond).MustWait(ctx)
	if ps, err := h.m.List(ctx, ada, "box"); err != nil || len(ps) != 1 {
		t.Fatalf("listed just before its retention ends: %v, %v", ps, err)
	}
	clock.Advance(time.Millisecond).MustWait(ctx)
	if ps, err := h.m.List(ctx, ada, "box"); err != nil || len(ps) != 0 {
		t.Errorf("listed once its retention ended: %v, %v", ps, err)
	}
	if _, err := h.m.Get(ctx, ada, "box", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get once its retention ended: %v", err)
	}
}

// TestTimesHaveMilliseconds: started_at and ended_at are written with exactly milliseconds,
// in UTC, like every time hangar answers with.
func TestTimesHaveMilliseconds(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	clock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)))
	h := newHarness(t, Config{Clock: clock})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h.waitEnd(ctx, t, ada, info.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"started_at":"2026-01-02T02:04:05.000Z"`, `"ended_at":"2026-01-02T02:04:05.000Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s has no %s", b, want)
		}
	}
	running, _ := json.Marshal(Info{StartedAt: clock.Now().Add(120 * time.Millisecond)})
	if !regexp.MustCompile(`"started_at":"2026-01-02T02:04:05.120Z"`).Match(running) || strings.Contains(string(running), "ended_at") {
		t.Errorf("a running process: %s", running)
	}
}

// TestStartBadCwd: a cwd that is not there is the caller's mistake, said in the daemon's words,
// without the shell hangar runs commands with.
func TestStartBadCwd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true", Cwd: "/no/such/dir"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "/no/such/dir") || strings.Contains(err.Error(), "/bin/sh") {
		t.Errorf("start in a missing cwd: %v", err)
	}
}

// TestReadNext: each token reads a terminal's output once, from its own position; a token
// that closed the terminal no longer reads it.
func TestReadNext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat", PTY: &PTYSize{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	if sb, ok := h.m.Locate(ada, info.ID); !ok || sb != "box" {
		t.Errorf("Locate: %q, %v", sb, ok)
	}
	readUntil := func(want string) string {
		t.Helper()
		var seen string
		for !strings.Contains(seen, want) {
			out, _, err := h.m.ReadNext(ctx, ada, "box", info.ID)
			if err != nil {
				t.Fatal(err)
			}
			seen += string(out.Data)
			if ctx.Err() != nil {
				t.Fatalf("read %q, no %q", seen, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return seen
	}
	if err := h.m.Input(ctx, ada, "box", info.ID, []byte("one\n"), false); err != nil {
		t.Fatal(err)
	}
	readUntil("one\r\none\r\n") // the echo, then cat's
	if err := h.m.Resize(ctx, ada, "box", info.ID, PTYSize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Input(ctx, ada, "box", info.ID, []byte("two\n"), false); err != nil {
		t.Fatal(err)
	}
	if again := readUntil("two\r\ntwo\r\n"); strings.Contains(again, "one") {
		t.Errorf("a later read repeats earlier output: %q", again)
	}
	// The admin's position is its own: it reads from the start.
	if out, _, err := h.m.ReadNext(ctx, admin, "box", info.ID); err != nil || !strings.Contains(string(out.Data), "one") {
		t.Errorf("the admin's first read: %q, %v", out.Data, err)
	}
	if _, err := h.m.CloseTerminal(ctx, ada, "box", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.m.ReadNext(ctx, ada, "box", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a read after the close: %v", err)
	}
	if _, ok := h.m.Locate(ada, info.ID); ok {
		t.Error("a closed terminal is located")
	}
	if end := h.waitEnd(ctx, t, ada, info.ID); !end.Killed {
		t.Errorf("a closed terminal's end: %+v, want it killed (on purpose: not a failure)", end)
	}
}

// TestCloseStopsKillTimers: Close returns while a kill waits out its grace for a process that
// ignores SIGTERM: the kill timer derives from the Manager's root context.
func TestCloseStopsKillTimers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info := h.startIgnoringTerm(ctx, t)
	if _, err := h.m.Kill(ctx, ada, "box", info.ID); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { defer close(closed); h.m.Close() }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close waits for a kill's grace")
	}
	c := h.client(t)
	if err := c.Signal(ctx, envdByTag(h, info.ID), envd.SIGKILL); err != nil {
		t.Errorf("kill it for good: %v", err)
	}
}

// TestRevokedTokenKills: when the stream registry revokes the token that started a process,
// its follower kills the process and ends it saying why.
func TestRevokedTokenKills(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	h.streams.EndToken(ada.TokenID)
	end := h.waitEnd(ctx, t, ada, info.ID)
	if end.State != StateExited || !strings.Contains(end.Status, "revoked") {
		t.Errorf("after the revocation: %+v", end)
	}
	// The daemon has it ended (or has forgotten it already).
	st, err := h.client(t).Connect(ctx, envdByTag(h, info.ID))
	if err == nil {
		defer st.Close()
		for {
			ev, err := st.Next()
			if err != nil {
				t.Fatalf("the daemon's stream of the killed process: %v", err)
			}
			if ev.Kind == envd.EventEnd {
				break
			}
		}
	} else if !errors.Is(err, envd.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestAdoptAfterRestart: a Manager over the same records and daemon follows again a process
// the previous one started (and stopped following when it closed), and sees it end.
func TestAdoptAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	h.m.Close()
	if rec, err := h.st.GetProcess(ctx, info.ID); err != nil || rec.State != "running" {
		t.Fatalf("the record once the Manager closed: %+v, %v", rec, err)
	}
	m2, err := New(h.m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	m2.AdoptAll(ctx)
	got, err := m2.Get(ctx, ada, "box", info.ID)
	if err != nil || !got.Adopted || got.State != StateRunning || got.PID != info.PID {
		t.Fatalf("adopted: %+v, %v", got, err)
	}
	if err := m2.Input(ctx, ada, "box", info.ID, []byte("hi\n"), true); err != nil {
		t.Fatal(err)
	}
	for {
		out, pi, err := m2.Read(ctx, ada, "box", info.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pi.State == StateExited {
			if string(out.Data) != "hi\n" {
				t.Errorf("output after the adoption: %q", out.Data)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the adopted process did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.waitRecordEnded(ctx, t, info.ID)
}

// TestPolledThroughManager: in a sandbox without a daemon the Manager follows a process by
// polling, refuses input and terminals, and kills the process of a revoked token.
func TestPolledThroughManager(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{PollAttached: time.Millisecond, PollIdle: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "plain", StartRequest{Command: "echo polled; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Daemon {
		t.Errorf("started: %+v, want no daemon", info)
	}
	end := h.waitEndIn(ctx, t, ada, "plain", info.ID)
	if end.ExitCode == nil || *end.ExitCode != 4 {
		t.Errorf("ended: %+v", end)
	}
	if out, _, err := h.m.Read(ctx, ada, "plain", info.ID, 0); err != nil || string(out.Data) != "polled\n" {
		t.Errorf("output %q, %v", out.Data, err)
	}
	if _, err := h.m.Start(ctx, ada, "plain", StartRequest{Command: "sh", PTY: &PTYSize{Cols: 80, Rows: 24}}); !errors.Is(err, ErrNeedsDaemon) {
		t.Errorf("a terminal without a daemon: %v", err)
	}
	long, err := h.m.Start(ctx, ada, "plain", StartRequest{Command: "echo up; sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.Input(ctx, ada, "plain", long.ID, []byte("x"), false); !errors.Is(err, ErrNeedsDaemon) {
		t.Errorf("input without a daemon: %v", err)
	}
	h.waitOutput(ctx, t, "plain", long.ID) // once it printed, its group exists and can be signalled
	h.streams.EndToken(ada.TokenID)
	if end := h.waitEndIn(ctx, t, ada, "plain", long.ID); !strings.Contains(end.Status, "revoked") {
		t.Errorf("after the revocation: %+v", end)
	}
}

// TestKillGraceByClock: kill sends SIGTERM, and SIGKILL once KillGrace has passed on the
// manager's clock; a process that ignores SIGTERM runs until the clock gets there.
func TestKillGraceByClock(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	kills := clock.Trap().NewTimer("process", "kill")
	defer kills.Close()
	h := newHarness(t, Config{KillGrace: 3 * time.Second, Clock: clock})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info := h.startIgnoringTerm(ctx, t)
	if _, err := h.m.Kill(ctx, ada, "box", info.ID); err != nil {
		t.Fatal(err)
	}
	call := kills.MustWait(ctx)
	if call.Duration != 3*time.Second {
		t.Errorf("SIGKILL after %s, want KillGrace (3s)", call.Duration)
	}
	call.MustRelease(ctx)
	if i, err := h.m.Get(ctx, ada, "box", info.ID); err != nil || i.State != StateRunning {
		t.Fatalf("before the grace ended: %+v, %v; want running (it ignores SIGTERM)", i, err)
	}
	clock.Advance(3 * time.Second).MustWait(ctx)
	if i := h.waitEnd(ctx, t, ada, info.ID); i.State != StateExited {
		t.Errorf("after the grace: %+v, want exited", i)
	}
}

// startIgnoringTerm starts, as ada in box, a process that ignores SIGTERM, and returns once it
// runs (it printed). It is killed for good when the test ends, whatever became of the test.
func (h *harness) startIgnoringTerm(ctx context.Context, t *testing.T) Info {
	t.Helper()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "trap '' TERM; echo ready; while :; do sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.client(t).Signal(context.Background(), envdByTag(h, info.ID), envd.SIGKILL) })
	h.waitOutput(ctx, t, "box", info.ID)
	return info
}

// waitOutput waits until ada's process id in sandbox sb has printed something.
func (h *harness) waitOutput(ctx context.Context, t *testing.T, sb, id string) {
	t.Helper()
	for {
		out, _, err := h.m.Read(ctx, ada, sb, id, 0)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("no output from %s: %v", id, err)
		}
		if len(out.Data) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOffsetSince: the output of the last minute starts where what was printed in it starts;
// further back than anything printed, at the oldest kept; a time back below 0 is refused.
func TestOffsetSince(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	clock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, Config{Clock: clock})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	h.input(ctx, t, info.ID, "one\n", 4)
	clock.Advance(2 * time.Minute).MustWait(ctx)
	h.input(ctx, t, info.ID, "two\n", 8)
	for _, c := range []struct {
		ago  time.Duration
		want int64
	}{{time.Minute, 4}, {0, 4}, {3 * time.Minute, 0}} {
		if off, err := h.m.OffsetSince(ctx, ada, "box", info.ID, c.ago); err != nil || off != c.want {
			t.Errorf("OffsetSince(%v) = %d, %v; want %d", c.ago, off, err, c.want)
		}
	}
	if _, err := h.m.OffsetSince(ctx, ada, "box", info.ID, -time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("OffsetSince(-1s) = %v, want ErrInvalid", err)
	}
	if _, err := h.m.OffsetSince(ctx, ada2, "box", info.ID, time.Minute); !errors.Is(err, ErrNotFound) {
		t.Errorf("OffsetSince of another token's process = %v, want ErrNotFound", err)
	}
}

// input writes s to ada's process id and waits until its output reaches offset end.
func (h *harness) input(ctx context.Context, t *testing.T, id, s string, end int64) {
	t.Helper()
	if err := h.m.Input(ctx, ada, "box", id, []byte(s), false); err != nil {
		t.Fatal(err)
	}
	for {
		out, _, err := h.m.Read(ctx, ada, "box", id, 0)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("output of %s did not reach %d: %v", id, end, err)
		}
		if out.Next >= end {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
