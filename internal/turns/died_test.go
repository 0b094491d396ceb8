package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// drive moves the fixture's clock on to its next event every few milliseconds until the test
// ends, so the watchers poll as fast as the machine allows. Started only once the sandbox is
// broken: before, the clock stands still and a turn is followed. (Not a trap per timer: a
// watcher may be waiting on a timer made before the drive began.)
func (f *daemonFixture) drive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if d, ok := f.clock.Peek(); ok {
				if f.clock.Advance(d).Wait(ctx) != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// killDaemon kills the sandbox's daemon as kill -9 does (local), or the container under it
// (Docker: it exits 137), and waits until it is gone.
func (f *daemonFixture) killDaemon(t *testing.T, ctx context.Context) {
	t.Helper()
	if f.sb.Provider == "docker" {
		if err := dockertest.Client(t).ContainerKill(ctx, f.sb.ProviderID, "KILL"); err != nil {
			t.Fatal(err)
		}
		return
	}
	pid, err := strconv.Atoi(f.sb.Data["pid"])
	if err != nil {
		t.Fatalf("the local sandbox's daemon pid %q: %v", f.sb.Data["pid"], err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the daemon gone", func() bool { return processGone(pid) })
}

// processGone reports whether pid is no more, or a zombie (its parent, init, has not reaped it).
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	st, err := readFileString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

// groupGone reports whether no process of group pgid runs (zombies aside).
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// pidOf returns the pid the agent printed in a {"type":"pid"} line.
func pidOf(t *testing.T, ctx context.Context, st store.Store, sessionID string) int {
	t.Helper()
	evs, err := st.ListEvents(ctx, sessionID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var v struct {
			Type string
			PID  int
		}
		if json.Unmarshal(e.Data, &v) == nil && v.Type == "pid" {
			return v.PID
		}
	}
	t.Fatal("the agent printed no pid")
	return 0
}

// gatedLines prints 3 lines, waits for gate, then prints n more and exits 0.
func gatedLines(gate string, n int) string {
	return `for i in 1 2 3; do echo '{"type":"before"}'; done; ` + waitGate(gate) +
		fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo '{"type":"t"}'; i=$((i+1)); done`, n)
}

// TestDaemonKilledUnderTurn: the daemon dies under a running turn. On local its harness runs
// on (it left the daemon's session): the turn is read through the provider's exec and recorded
// as it ran, every line and its exit code 0. On Docker the container exits with it (137):
// nothing is left to read, and the turn ends failed at once, saying the sandbox stopped —
// without a poll (the clock stands still), as soon as hangar knows. Before, either turn stayed
// running for good, its watcher failing every 5 s.
func TestDaemonKilledUnderTurn(t *testing.T) {
	t.Parallel()
	onDaemons(t, func(t *testing.T, f *daemonFixture) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
		if err != nil {
			t.Fatal(err)
		}
		gate := path.Join(f.root, "gate")
		tu, err := f.s.StartTurn(ctx, admin, "s1", gatedLines(gate, 120))
		if err != nil {
			t.Fatal(err)
		}
		waitEvents(t, ctx, f.st, se.ID, 1+3)
		f.killDaemon(t, ctx)
		if f.sb.Provider == "docker" {
			end := waitTurn(t, ctx, f.st, tu.ID)
			if end.State != store.TurnFailed || !strings.HasPrefix(end.Reason, "the sandbox stopped: ") {
				t.Errorf("turn = %s (%q), want failed: the sandbox stopped", end.State, end.Reason)
			}
			return
		}
		if err := writeFileString(gate, ""); err != nil { // the local sandbox's run root is on the host
			t.Fatal(err)
		}
		f.drive(t)
		end := waitTurn(t, ctx, f.st, tu.ID)
		if end.State != store.TurnDone || end.ExitCode == nil || *end.ExitCode != 0 {
			t.Errorf("turn = %s (exit %v, %q), want done with exit code 0", end.State, end.ExitCode, end.Reason)
		}
		if evs, _ := f.st.ListEvents(ctx, se.ID, 0, 1000); len(evs) != 1+3+120+1 {
			t.Errorf("%d events, want turn.started, 123 lines, turn.finished", len(evs))
		}
	})
}

// TestDaemonKilledAcrossRestart: the daemon dies while hangar is down; the turn's harness
// finishes meanwhile. The next hangar's Resume reads it through the provider's exec and records
// it as it ran.
func TestDaemonKilledAcrossRestart(t *testing.T) {
	t.Parallel()
	f := newDaemonFixture(t, "local")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	gate := path.Join(f.root, "gate")
	tu, err := f.s.StartTurn(ctx, admin, "s1", gatedLines(gate, 120))
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, f.st, se.ID, 1+3)
	f.s.Close()
	f.killDaemon(t, ctx)
	if err := writeFileString(gate, ""); err != nil {
		t.Fatal(err)
	}
	s2 := New(f.cfg)
	t.Cleanup(s2.Close)
	f.drive(t)
	if err := s2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnDone || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Errorf("turn = %s (exit %v, %q), want done with exit code 0", end.State, end.ExitCode, end.Reason)
	}
	if evs, _ := f.st.ListEvents(ctx, se.ID, 0, 1000); len(evs) != 1+3+120+1 {
		t.Errorf("%d events, want turn.started, 123 lines, turn.finished", len(evs))
	}
}

// TestDestroyUnderTurn: a sandbox destroyed while a turn runs in it stays destroyed (the check
// that followed the broken daemon stored it failed, and listed it again), the turn ends
// cancelled because the sandbox was destroyed, the session can be removed, and on local the
// harness and the agent, which had left the daemon's session, are gone with the folder.
func TestDestroyUnderTurn(t *testing.T) {
	t.Parallel()
	onDaemons(t, func(t *testing.T, f *daemonFixture) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
		if err != nil {
			t.Fatal(err)
		}
		tu, err := f.s.StartTurn(ctx, admin, "s1", `echo "{\"type\":\"pid\",\"pid\":$$}"; for i in $(seq 100); do echo '{"type":"t"}'; sleep 1; done`)
		if err != nil {
			t.Fatal(err)
		}
		waitEvents(t, ctx, f.st, se.ID, 1+2)
		agent := pidOf(t, ctx, f.st, se.ID)
		running, _ := f.st.GetTurn(ctx, tu.ID)
		if err := f.sbs.Destroy(ctx, admin, f.sb.Name); err != nil {
			t.Fatal(err)
		}
		f.drive(t)
		end := waitTurn(t, ctx, f.st, tu.ID)
		if end.State != store.TurnCancelled || end.Reason != "the sandbox was destroyed" {
			t.Errorf("turn = %s (%q), want cancelled: the sandbox was destroyed", end.State, end.Reason)
		}
		f.sbs.Reconcile(ctx)
		if sb, err := f.st.GetSandbox(ctx, f.sb.Name); err != nil || sb.State != string(provider.StateDestroyed) {
			t.Errorf("the sandbox is %s (%q, %v), want destroyed", sb.State, sb.Reason, err)
		}
		if err := f.s.DeleteSession(ctx, admin, "s1"); err != nil {
			t.Errorf("DeleteSession after the turn ended: %v", err)
		}
		if f.sb.Provider == "local" {
			waitFor(t, ctx, "the agent and the harness gone", func() bool {
				return groupGone(agent) && processGone(int(running.ProcessPID))
			})
		}
	})
}

// TestCancelWithDaemonGone: a turn whose sandbox's daemon died is cancelled all the same: the
// signal goes through the provider's exec, the agent dies, and the turn ends cancelled. Before,
// the cancel was 503 for good.
func TestCancelWithDaemonGone(t *testing.T) {
	t.Parallel()
	f := newDaemonFixture(t, "local")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := f.s.StartTurn(ctx, admin, "s1", `echo "{\"type\":\"pid\",\"pid\":$$}"; sleep 600`)
	if err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, f.st, se.ID, 1+1)
	agent := pidOf(t, ctx, f.st, se.ID)
	f.killDaemon(t, ctx)
	if _, err := f.s.CancelTurn(ctx, admin, "s1", tu.ID); err != nil {
		t.Fatalf("CancelTurn: %v", err)
	}
	f.drive(t)
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnCancelled {
		t.Errorf("turn = %s (%q), want cancelled", end.State, end.Reason)
	}
	waitFor(t, ctx, "the agent gone", func() bool { return groupGone(agent) })
}

func readFileString(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

func writeFileString(name, data string) error { return os.WriteFile(name, []byte(data), 0o644) }
