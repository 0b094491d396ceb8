package turns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// gatedPrompt prints a line, waits for the gate file, then prints another.
func gatedPrompt(gate string) string {
	// It also ends once the gate's folder is gone: a test opens the gate as it returns, and its
	// TempDir may be removed before the loop looks again (the loop then ran on for good).
	return pauseFD + fmt.Sprintf(`echo '{"type":"one"}'; while [ ! -e %q ] && [ -d %q ]; do read -t 0.01 -u 9 || :; done; echo '{"type":"two"}'`, gate, filepath.Dir(gate))
}

// waitEvents waits until the session has at least n events.
func waitEvents(t *testing.T, ctx context.Context, st store.Store, sessionID string, n int) {
	t.Helper()
	if !waitAppends(ctx, st, func() bool {
		evs, _ := st.ListEvents(ctx, sessionID, 0, 1000)
		return len(evs) >= n
	}) {
		t.Fatalf("timed out waiting for %d events", n)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-timeAfter10ms():
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	gate := filepath.Join(t.TempDir(), "gate")
	defer os.WriteFile(gate, nil, 0o644)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	first, err := s.StartTurn(ctx, ada, "s1", gatedPrompt(gate))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown session", func() error { _, err := s.StartTurn(ctx, ada, "nope", "echo"); return err }, ErrNotFound},
		{"another user's session", func() error { _, err := s.GetSession(ctx, bob, "s1"); return err }, ErrNotFound},
		{"a jobs token's sessions", func() error { _, err := s.GetSession(ctx, adaJobs, "s1"); return err }, ErrNotFound},
		{"second turn while one runs", func() error { _, err := s.StartTurn(ctx, ada, "s1", "echo"); return err }, ErrConflict},
		{"empty prompt", func() error { _, err := s.StartTurn(ctx, ada, "s1", "  "); return err }, ErrInvalid},
		{"a NUL in the prompt", func() error { _, err := s.StartTurn(ctx, ada, "s1", "echo a\x00b"); return err }, ErrInvalid},
		{"a prompt over 128 KiB", func() error { _, err := s.StartTurn(ctx, ada, "s1", strings.Repeat("#", MaxPrompt+1)); return err }, ErrInvalid},
		{"a job's prompt with a NUL", func() error {
			_, err := s.CreateJob(ctx, ada, JobRequest{Prompt: "echo a\x00b", Agent: "command", Sandbox: "box"})
			return err
		}, ErrInvalid},
		{"a session's env with a NUL", func() error {
			_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s4", Sandbox: "box", Agent: "command", Env: map[string]string{"A": "x\x00"}})
			return err
		}, ErrInvalid},
		{"a session's env name with =", func() error {
			_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s4", Sandbox: "box", Agent: "command", Env: map[string]string{"A=B": "x"}})
			return err
		}, ErrInvalid},
		{"a split uid out of range", func() error {
			_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s4", Sandbox: "box", Agent: "command", Split: true, SplitUID: 1 << 31})
			return err
		}, ErrInvalid},
		{"a job's env too long", func() error {
			_, err := s.CreateJob(ctx, ada, JobRequest{Prompt: "echo", Agent: "command", Sandbox: "box", Env: map[string]string{"A": strings.Repeat("v", 128<<10)}})
			return err
		}, ErrInvalid},
		{"unknown agent", func() error {
			_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s2", Sandbox: "box", Agent: "gpt"})
			return err
		}, ErrInvalid},
		{"taken name", func() error {
			_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
			return err
		}, ErrConflict},
		{"another user's sandbox", func() error {
			_, err := s.CreateSession(ctx, bob, CreateSessionRequest{Name: "s3", Sandbox: "box", Agent: "command"})
			return err
		}, ErrNotFound},
		{"delete while a turn runs", func() error { return s.DeleteSession(ctx, ada, "s1") }, ErrConflict},
		{"negative since", func() error { _, err := s.ListEvents(ctx, ada, "s1", -1, 10); return err }, ErrInvalid},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	os.WriteFile(gate, nil, 0o644)
	waitTurn(t, ctx, f.st, first.ID)
	if err := s.DeleteSession(ctx, ada, "s1"); err != nil {
		t.Errorf("DeleteSession after the turn: %v", err)
	}
}

// TestLongestPrompt: a prompt as long as an agent's command line takes reaches the agent whole
// (it is written into the sandbox in pieces, each command's line far below the kernel's bound).
func TestLongestPrompt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "long", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	head := `echo "{\"type\":\"len\",\"n\":${#BASH_EXECUTION_STRING}}" #`
	prompt := head + strings.Repeat("x", MaxPrompt-len(head))
	tu, err := s.StartTurn(ctx, ada, "long", prompt)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTurn(t, ctx, f.st, tu.ID); got.State != "done" {
		t.Fatalf("turn %s (%s), want done", got.State, got.Reason)
	}
	evs, err := f.st.ListEvents(ctx, tu.SessionID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var saw bool
	for _, e := range evs {
		if e.Type == "len" {
			saw = true
			if want := fmt.Sprintf(`"n":%d`, MaxPrompt); !strings.Contains(string(e.Data), want) {
				t.Errorf("the agent got a prompt of %s, want %s", e.Data, want)
			}
		}
	}
	if !saw {
		t.Errorf("no event from the agent: %+v", evs)
	}
}

// TestRestartMidTurn closes the service while a turn runs and starts another on the same
// store: every line is recorded once, in order.
func TestRestartMidTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s1 := New(f.cfg) // no clock driver: it records only its first poll
	se, err := s1.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	tu, err := s1.StartTurn(ctx, ada, "s1", gatedPrompt(gate)+`; echo '{"type":"three"}'`)
	if err != nil {
		t.Fatal(err)
	}
	// Let the first poll record turn.started and "one": wait for the watcher to wait.
	waitEvents(t, ctx, f.st, se.ID, 1)
	waitFor(t, ctx, "the first line recorded", func() bool {
		tt, _ := f.st.GetTurn(ctx, tu.ID)
		if tt.ReadPos > 0 {
			return true
		}
		f.clock.Advance(f.cfg.PollInterval).MustWait(ctx) // the first poll may have come before the line
		return false
	})
	s1.Close()
	os.WriteFile(gate, nil, 0o644)

	s2 := f.service(t)
	if err := s2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, ctx, f.st, tu.ID)
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n{\"type\":\"three\"}\n"))
}

// TestCancelRunningTurn cancels a running turn: it ends cancelled, its agent gone.
func TestCancelRunningTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	// The agent and a child of its own: both in the agent's process group.
	tu, err := s.StartTurn(ctx, ada, "s1", `sleep 600 & echo "{\"type\":\"pid\",\"pid\":$$}"; wait`)
	if err != nil {
		t.Fatal(err)
	}
	pgid := agentPGID(t, ctx, f, tu.SessionID, false)
	if _, err := s.CancelTurn(ctx, ada, "s1", tu.ID); err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnCancelled || end.Signal != "SIGTERM" {
		t.Errorf("turn = %+v, want cancelled by SIGTERM", end)
	}
	waitFor(t, ctx, "the agent's process group to be gone", func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	})
	// Forward only: a cancelled turn stays so.
	if again, err := s.CancelTurn(ctx, ada, "s1", tu.ID); err != nil || again.State != store.TurnCancelled {
		t.Errorf("cancel again = %+v, %v", again, err)
	}
}

// TestJobsTokenIsolation: a job started with a jobs token is seen by that token only.
func TestJobsTokenIsolation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	j, err := s.CreateJob(ctx, adaJobs, JobRequest{Prompt: `echo '{"type":"hello"}'`, Agent: "command", Sandbox: "box"})
	if err != nil {
		t.Fatal(err)
	}
	waitTurn(t, ctx, f.st, j.TurnID)
	if _, err := s.GetJob(ctx, adaJobs, j.ID); err != nil {
		t.Errorf("GetJob by its token: %v", err)
	}
	for _, p := range []struct {
		name string
		err  error
	}{{"another jobs token", func() error { _, err := s.GetJob(ctx, adaJob2, j.ID); return err }()},
		{"another user", func() error { _, err := s.GetJob(ctx, bob, j.ID); return err }()},
		{"cancel by another jobs token", func() error { _, err := s.CancelJob(ctx, adaJob2, j.ID); return err }()},
		{"events by another jobs token", func() error { _, err := s.ListJobEvents(ctx, adaJob2, j.ID, 0, 10); return err }()}} {
		if !errors.Is(p.err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", p.name, p.err)
		}
	}
	if js, err := s.ListJobs(ctx, adaJob2); err != nil || len(js) != 0 {
		t.Errorf("ListJobs by another jobs token = %v, %v; want none", js, err)
	}
	if ss, err := s.ListSessions(ctx, adaJobs); err != nil || len(ss) != 0 {
		t.Errorf("ListSessions by a jobs token = %v, %v; want none", ss, err)
	}
	evs, err := s.ListJobEvents(ctx, adaJobs, j.ID, 0, 10)
	if err != nil || len(evs) != 3 || evs[1].JobSeq != 2 || string(evs[1].Data) != `{"type":"hello"}` {
		t.Errorf("ListJobEvents = %+v, %v; want started, hello, finished", evs, err)
	}
}

// TestOddLinesRecorded: a line that is not JSON and a line over 1 MiB (read in several pieces)
// are recorded flagged, and the lines around them intact, with following off and on.
func TestOddLinesRecorded(t *testing.T) {
	t.Parallel()
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow=%v", follow), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := newFixture(t)
			f.cfg.Follow = follow
			s := f.service(t)
			se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
			if err != nil {
				t.Fatal(err)
			}
			prompt := `echo '{"type":"before"}'; echo 'Error: not json'; printf '{"type":"big","x":"'; head -c 1200000 /dev/zero | tr '\0' a; echo '"}'; echo '{"type":"after"}'`
			tu, err := s.StartTurn(ctx, ada, "s1", prompt)
			if err != nil {
				t.Fatal(err)
			}
			waitTurn(t, ctx, f.st, tu.ID)
			evs, err := f.st.ListEvents(ctx, se.ID, 0, 100)
			if err != nil || len(evs) != 6 {
				t.Fatalf("%d events, %v; want 6", len(evs), err)
			}
			if e := evs[1]; e.Type != "before" || e.Invalid || e.Truncated {
				t.Errorf("event 2 = %s %s", e.Type, e.Data)
			}
			if e := evs[2]; e.Type != TypeInvalid || !e.Invalid || string(e.Data) != `"Error: not json"` {
				t.Errorf("event 3 = %s %s invalid=%v", e.Type, e.Data, e.Invalid)
			}
			if e := evs[3]; e.Type != "big" || !e.Truncated || len(e.Data) < MaxLineBytes || len(e.Data) > MaxLineBytes+64 { // quoted: its quotes escaped
				t.Errorf("event 4 = type %s truncated=%v, %d bytes; want the big line cut to 1 MiB", e.Type, e.Truncated, len(e.Data))
			}
			if e := evs[4]; e.Type != "after" || string(e.Data) != `{"type":"after"}` {
				t.Errorf("event 5 = %s %.80s", e.Type, e.Data)
			}
			if end, _ := f.st.GetTurn(ctx, tu.ID); end.ReadPos != int64(len(`{"type":"before"}`)+1+len("Error: not json")+1+len(`{"type":"big","x":"`)+1200000+3+len(`{"type":"after"}`)+1) {
				t.Errorf("read position %d", end.ReadPos)
			}
		})
	}
}

// TestSessionStaysWithItsSandbox: a session belongs to the sandbox it was made in, not to its
// name. Once ada's box is destroyed and bob makes a box of his own, ada's session runs nothing
// in bob's: its turn fails, saying why, and no command reached any sandbox.
func TestSessionStaysWithItsSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	old, err := f.st.GetSandbox(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	old.State = "destroyed"
	if err := f.st.UpdateSandbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := f.st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "bob", Provider: "local", State: "running", CreatedAt: later, UpdatedAt: later}); err != nil {
		t.Fatal(err)
	}
	f.sbs.mu.Lock()
	f.sbs.cmds = nil
	f.sbs.mu.Unlock()
	turn, err := s.StartTurn(ctx, ada, "s1", "echo '{\"type\":\"pwned\"}'")
	if err != nil {
		t.Fatal(err)
	}
	got := waitTurn(t, ctx, f.st, turn.ID)
	if got.State != store.TurnFailed || !strings.Contains(got.Reason, "destroyed") {
		t.Errorf("turn = %s (%q), want failed because its sandbox was destroyed", got.State, got.Reason)
	}
	f.sbs.mu.Lock()
	defer f.sbs.mu.Unlock()
	if len(f.sbs.cmds) != 0 {
		t.Errorf("commands ran in the sandbox that took the name: %q", f.sbs.cmds)
	}
}

// TestTurnEndsWithItsSandbox: a running turn whose sandbox is destroyed ends cancelled, because
// the sandbox was destroyed (its watcher does not poll a sandbox that is gone for ever), and the
// session takes turns again.
func TestTurnEndsWithItsSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	gate := filepath.Join(t.TempDir(), "gate")
	defer os.WriteFile(gate, nil, 0o644)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := s.StartTurn(ctx, ada, "s1", gatedPrompt(gate))
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, f.st, se.ID, 2) // turn.started and the first line: it runs
	sb, err := f.st.GetSandbox(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	sb.State = "destroyed"
	if err := f.st.UpdateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got := waitTurn(t, ctx, f.st, turn.ID)
	if got.State != store.TurnCancelled || got.Reason != "the sandbox was destroyed" {
		t.Errorf("turn = %s (%q), want cancelled because the sandbox was destroyed", got.State, got.Reason)
	}
}

// TestTurnEndsWhenItsSandboxIsPaused: a running turn's sandbox paused under it ends the turn
// failed, saying so, at the watcher's next look (a paused daemon would hold a read until its
// timeout); a job's turn whose sandbox is destroyed ends cancelled, and the job with it.
func TestTurnEndsWhenItsSandboxIsPaused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		state, want, reason string
		job                 bool
	}{
		{"paused", store.TurnFailed, "the sandbox was paused while the turn ran", false},
		{"destroyed", store.TurnCancelled, "the sandbox was destroyed", true},
	} {
		t.Run(c.state, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := newFixture(t)
			s := f.service(t)
			gate := filepath.Join(t.TempDir(), "gate")
			defer os.WriteFile(gate, nil, 0o644)
			var turnID, sessionID string
			if c.job {
				j, err := s.CreateJob(ctx, ada, JobRequest{Prompt: gatedPrompt(gate), Agent: "command", Sandbox: "box"})
				if err != nil {
					t.Fatal(err)
				}
				turnID, sessionID = j.TurnID, j.SessionID
			} else {
				se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
				if err != nil {
					t.Fatal(err)
				}
				tu, err := s.StartTurn(ctx, ada, "s1", gatedPrompt(gate))
				if err != nil {
					t.Fatal(err)
				}
				turnID, sessionID = tu.ID, se.ID
			}
			waitEvents(t, ctx, f.st, sessionID, 2)
			sb, err := f.st.GetSandbox(ctx, "box")
			if err != nil {
				t.Fatal(err)
			}
			sb.State = c.state
			if err := f.st.UpdateSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
			got := waitTurn(t, ctx, f.st, turnID)
			if got.State != c.want || got.Reason != c.reason {
				t.Errorf("turn = %s (%q), want %s (%q)", got.State, got.Reason, c.want, c.reason)
			}
			if c.state == "paused" {
				// The harness, which runs on in a paused local sandbox (only the daemon's
				// session stops), was told to end: it writes its status file once the agent,
				// whose gate never opens, is gone.
				waitFor(t, ctx, "the harness's status file", func() bool {
					_, err := os.Stat(filepath.Join(got.Dir, "status.json"))
					return err == nil
				})
			}
		})
	}
}

// TestWatcherGivesUp: a turn whose run log cannot be read, for a reason that says nothing of
// its sandbox, is not polled for ever: after a minute of failed reads it ends failed with the
// last error.
func TestWatcherGivesUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	// A minute of failed reads: each a poll, with nothing changing; 30 s apart, as few polls as
	// pass the minute.
	f.idle, f.cfg.PollInterval = 0, 30*time.Second
	s := f.service(t)
	gate := filepath.Join(t.TempDir(), "gate")
	defer os.WriteFile(gate, nil, 0o644)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s1", gatedPrompt(gate))
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, f.st, se.ID, 2)
	f.sbs.mu.Lock()
	f.sbs.runErr = errors.New("the network is down")
	f.sbs.mu.Unlock()
	got := waitTurn(t, ctx, f.st, tu.ID)
	if want := "hangar could not read the turn's run log for 1m0s: read status file: the network is down"; got.State != store.TurnFailed || got.Reason != want {
		t.Errorf("turn = %s (%q), want failed (%q)", got.State, got.Reason, want)
	}
}

// TestJobSessionGoesWithItsJob: a job's session cannot be deleted on its own.
func TestJobSessionGoesWithItsJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	j, err := s.CreateJob(ctx, ada, JobRequest{Prompt: `echo '{"type":"x"}'`, Agent: "command", Sandbox: "box"})
	if err != nil {
		t.Fatal(err)
	}
	waitTurn(t, ctx, f.st, j.TurnID)
	if err := s.DeleteSession(ctx, ada, j.SessionID); !errors.Is(err, ErrConflict) {
		t.Errorf("DeleteSession(a job's session) = %v, want ErrConflict", err)
	}
}

// TestNoTurnAfterClose: a turn asked for once the service closed is refused, not left queued.
func TestNoTurnAfterClose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := New(f.cfg)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.StartTurn(ctx, ada, "s1", "echo"); !errors.Is(err, stream.ErrShuttingDown) {
		t.Errorf("StartTurn after Close = %v, want ErrShuttingDown", err)
	}
	ts, err := s.ListTurns(ctx, ada, "s1")
	if err != nil || len(ts) != 1 || ts[0].State != TurnFailed {
		t.Errorf("turns after the refusal = %+v, %v; want one, failed", ts, err)
	}
}

// downStore is a store whose AppendEvents fails as a database that does not answer, while down.
type downStore struct {
	store.Store
	down    atomic.Bool
	refused atomic.Int64
}

func (d *downStore) AppendEvents(ctx context.Context, a store.EventAppend) ([]store.Event, error) {
	if d.down.Load() {
		d.refused.Add(1)
		return nil, fmt.Errorf("append events: %w", store.ErrUnavailable)
	}
	return d.Store.AppendEvents(ctx, a)
}

// TestTurnOutlastsAStoreOutage: a store that does not answer for longer than the watcher's
// bound on failed reads neither fails the turn nor leaves it running for good (its end could
// not be stored, and nothing watched it any more): once the store answers, the turn ends as
// its status file says, with every line.
func TestTurnOutlastsAStoreOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	ds := &downStore{Store: f.st}
	f.cfg.Store = ds
	// Refused appends past the watcher's minute of failed reads: each a poll, with nothing
	// changing; 30 s apart, as few polls as can pass the minute.
	f.idle, f.cfg.PollInterval = 0, 30*time.Second
	s := f.service(t)
	gate := filepath.Join(t.TempDir(), "gate")
	defer os.WriteFile(gate, nil, 0o644)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s1", gatedPrompt(gate))
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, f.st, se.ID, 2)
	ds.down.Store(true)
	os.WriteFile(gate, nil, 0o644)
	// Each refused append is a poll PollInterval (30 s) apart: 4 are well past the minute.
	waitFor(t, ctx, "4 refused appends", func() bool { return ds.refused.Load() >= 4 })
	ds.down.Store(false)
	got := waitTurn(t, ctx, f.st, tu.ID)
	if got.State != store.TurnDone {
		t.Errorf("turn = %s (%q), want done", got.State, got.Reason)
	}
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n"))
}
