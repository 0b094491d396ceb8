package turns

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

// agentPGID waits for the {"type":"pid"} line the agent prints and returns its process group.
// drive moves the clock here, a poll at a time, for a service without a clock driver (a
// second driver beside the next service's would move the clock twice).
func agentPGID(t *testing.T, ctx context.Context, f *fixture, sessionID string, drive bool) int {
	t.Helper()
	var pid int
	waitFor(t, ctx, "the agent's pid", func() bool {
		if drive {
			defer func() { f.clock.Advance(f.cfg.PollInterval).MustWait(ctx) }()
		}
		evs, _ := f.st.ListEvents(ctx, sessionID, 0, 100)
		for _, e := range evs {
			var v struct {
				Type string
				PID  int
			}
			if json.Unmarshal(e.Data, &v) == nil && v.Type == "pid" {
				pid = v.PID
				return true
			}
		}
		return false
	})
	return pid
}

// TestCancelSurvivesRestart: a cancel asked for just before the control plane stops still ends
// the turn, its agent's process group gone, and the turn is recorded cancelled: whether the
// stopping control plane sent the signal (the new one records the end) or only recorded the
// cancel (the new one sends it).
func TestCancelSurvivesRestart(t *testing.T) {
	t.Parallel()
	for _, signalled := range []bool{true, false} {
		name := map[bool]string{true: "signal sent", false: "only recorded"}[signalled]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := newFixture(t)
			s1 := New(f.cfg)
			defer s1.Close()
			se, err := s1.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
			if err != nil {
				t.Fatal(err)
			}
			tu, err := s1.StartTurn(ctx, ada, "s1", `echo "{\"type\":\"pid\",\"pid\":$$}"; sleep 600`)
			if err != nil {
				t.Fatal(err)
			}
			pgid := agentPGID(t, ctx, f, se.ID, true)
			s1.Close() // the control plane stops: nothing watches the turn
			if signalled {
				if _, err := s1.CancelTurn(ctx, ada, "s1", tu.ID); err != nil {
					t.Fatal(err)
				}
			} else if err := f.st.RequestCancel(ctx, tu.ID); err != nil { // it stopped before the signal
				t.Fatal(err)
			}
			s2 := f.service(t)
			if err := s2.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			end := waitTurn(t, ctx, f.st, tu.ID)
			if end.State != store.TurnCancelled || end.Signal != "SIGTERM" {
				t.Errorf("turn = %s (signal %q), want cancelled by SIGTERM", end.State, end.Signal)
			}
			waitFor(t, ctx, "the agent's process group to be gone", func() bool {
				return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
			})
		})
	}
}

// TestPidReuseNotSignalled: after a restart, a running turn's pid now names another process
// (its harness ended, the pid was given again). Its start time differs from the one recorded:
// a cancel does not signal it and the watcher does not take it for the harness, so the turn
// ends (cancelled, no status file) and the other process lives on.
func TestPidReuseNotSignalled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	// The process that got the pid: in a group of its own, as a harness is.
	other := exec.Command("sleep", "600")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	// The turn as a previous control plane left it: running, its harness that pid, started at
	// tick 1 after boot (not when "other" started).
	tu := store.Turn{ID: "turn_reused", SessionID: se.ID, Prompt: "x", State: store.TurnQueued, CreatedAt: time.Now()}
	if err := f.st.CreateTurn(ctx, tu); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := f.st.UpdateTurn(ctx, store.TurnUpdate{ID: tu.ID, State: store.TurnRunning, Dir: dir, ProcessPID: uint32(other.Process.Pid), ProcessStart: 1, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelTurn(ctx, ada, "s1", tu.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnCancelled {
		t.Errorf("turn = %s (%q), want cancelled", end.State, end.Reason)
	}
	// A SIGTERM sent to it would have set its exit already (default action: the kernel
	// records the fatal signal when it is sent): it must die of this SIGKILL.
	other.Process.Kill()
	other.Wait()
	if ws := other.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the process that got the pid ended %v: it was signalled as the turn's harness", other.ProcessState)
	}
}

// TestSessionNamesPerOwner: two users each have a session "fix-bug"; each name resolves in its
// caller's own sessions; an admin reaches another user's session by its id, not its name.
func TestSessionNamesPerOwner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	now := time.Now()
	if err := f.st.CreateSandbox(ctx, store.Sandbox{Name: "bobbox", Owner: "bob", Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	s := f.service(t)
	adas, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "fix-bug", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := s.CreateSession(ctx, bob, CreateSessionRequest{Name: "fix-bug", Sandbox: "bobbox", Agent: "command"})
	if err != nil {
		t.Fatalf("bob's fix-bug beside ada's: %v", err)
	}
	if _, err := s.CreateSession(ctx, bob, CreateSessionRequest{Name: "fix-bug", Sandbox: "bobbox", Agent: "command"}); !errors.Is(err, ErrConflict) {
		t.Errorf("bob's second fix-bug = %v, want ErrConflict", err)
	}
	for _, c := range []struct {
		who  auth.Principal
		ref  string
		want string
	}{{ada, "fix-bug", adas.ID}, {bob, "fix-bug", bobs.ID}, {bob, bobs.ID, bobs.ID}, {admin, adas.ID, adas.ID}, {admin, bobs.ID, bobs.ID}} {
		if got, err := s.GetSession(ctx, c.who, c.ref); err != nil || got.ID != c.want {
			t.Errorf("%s's GetSession(%s) = %s, %v; want %s", c.who.User, c.ref, got.ID, err, c.want)
		}
	}
	for _, c := range []struct {
		who auth.Principal
		ref string
	}{{admin, "fix-bug"}, {bob, adas.ID}, {ada, bobs.ID}} {
		if _, err := s.GetSession(ctx, c.who, c.ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s's GetSession(%s) = %v, want ErrNotFound", c.who.User, c.ref, err)
		}
	}
	// Bob's turn in his fix-bug runs in his sandbox's session, not ada's.
	tu, err := s.StartTurn(ctx, bob, "fix-bug", `echo '{"type":"bob"}'`)
	if err != nil || tu.SessionID != bobs.ID {
		t.Fatalf("bob's turn = %+v, %v; want in %s", tu, err, bobs.ID)
	}
	waitTurn(t, ctx, f.st, tu.ID)
	if ts, err := s.ListTurns(ctx, ada, "fix-bug"); err != nil || len(ts) != 0 {
		t.Errorf("ada's fix-bug turns = %+v, %v; want none", ts, err)
	}
	if err := s.DeleteSession(ctx, ada, "fix-bug"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSession(ctx, bob, "fix-bug"); err != nil || got.ID != bobs.ID {
		t.Errorf("bob's fix-bug after ada deleted hers = %+v, %v", got, err)
	}
}

var admin = auth.Principal{TokenID: "tok_root", User: "root", Scopes: []auth.Scope{auth.ScopeAdmin}}
