package turns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// fakeEnvd writes a script that stands for hangar's binary in the sandbox: before is shell run
// first with the arguments ("$@"), then it runs the real binary.
func fakeEnvd(t *testing.T, before string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hangar-envd")
	script := fmt.Sprintf("#!/bin/sh\n%s\nexec %s \"$@\"\n", before, shellQuote(hangarBin))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// oldEnvd is how a hangar-envd older than turn-dir answers it (and turn-poll, which came later).
const oldEnvd = `case "$1" in turn-dir|turn-poll) echo "hangar-envd: unknown command \"$1\" (run 'hangar-envd --help' for the list)" >&2; exit 2; esac`

// noPollEnvd is how a hangar-envd with turn-dir but older than turn-poll answers turn-poll.
const noPollEnvd = `[ "$1" = turn-poll ] && { echo 'hangar-envd: unknown command "turn-poll" (run '\''hangar-envd --help'\'' for the list)' >&2; exit 2; }`

// TestOldEnvdNewTurnSaysRecreate: in a sandbox whose hangar-envd is older than turn-dir (made
// before the upgrade), a new turn fails with a reason that says so and what to do.
func TestOldEnvdNewTurnSaysRecreate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	bin := fakeEnvd(t, oldEnvd)
	f.cfg.HarnessBinary = func(store.Sandbox) string { return bin }
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s", `echo '{"type":"hello"}'`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	want := "sandbox box runs an older hangar-envd without turn-dir: destroy and recreate it to run turns"
	if end.State != store.TurnFailed || !strings.Contains(end.Reason, want) {
		t.Errorf("turn = %s (%s); want failed, saying %q", end.State, end.Reason, want)
	}
}

// TestOldEnvdOldTurnRead: a turn an older hangar started in its old root, in a sandbox whose
// hangar-envd has no turn-dir, is still read after the upgrade (as that hangar read it): its
// lines are recorded and it ends as its status file says, not as a harness that wrote none.
func TestOldEnvdOldTurnRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	bin := fakeEnvd(t, oldEnvd)
	f.cfg.HarnessBinary = func(store.Sandbox) string { return bin }
	oldRoot := filepath.Join(t.TempDir(), "hangar-turns")
	f.cfg.OldRunRoots = []string{oldRoot}
	se, err := New(f.cfg).CreateSession(ctx, ada, CreateSessionRequest{Name: "old", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	id := startLegacyTurn(t, ctx, f, se.ID, oldRoot)
	if err := f.service(t).Resume(ctx); err != nil {
		t.Fatal(err)
	}
	checkLegacyTurnEnd(t, ctx, f, se.ID, id)
}

// TestTurnDirPassingFailureRetried: a read of a turn's directory that fails for a reason that
// may pass (here the first one: too many open files) is read again, not taken for a directory
// that is not hangar's alone: the turn ends as its status file says.
func TestTurnDirPassingFailureRetried(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	once := filepath.Join(t.TempDir(), "failed-once")
	bin := fakeEnvd(t, fmt.Sprintf(`{ [ "$1 $2" = "turn-dir read" ] || [ "$1" = turn-poll ]; } && [ ! -e %[1]s ] && { : > %[1]s; echo 'hangar-envd turn-dir: open turn directory: too many open files'; exit 1; }`, shellQuote(once)))
	f.cfg.HarnessBinary = func(store.Sandbox) string { return bin }
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s", `echo '{"type":"hello"}'`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnDone {
		t.Errorf("turn = %s (%s); want done: a failed read that may pass is read again", end.State, end.Reason)
	}
	if _, err := os.Stat(once); err != nil {
		t.Errorf("the read never failed: %v", err)
	}
}

// TestEnvdWithoutTurnPoll: in a sandbox whose hangar-envd has turn-dir but no turn-poll (made
// before it), a turn runs as before: the watcher asks turn-poll once, then reads the status and
// the log apart with turn-dir read; the turn's lines are recorded and it ends as its status
// file says.
func TestEnvdWithoutTurnPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	bin := fakeEnvd(t, noPollEnvd)
	f.cfg.HarnessBinary = func(store.Sandbox) string { return bin }
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s", `echo '{"type":"hello"}'; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnFailed || end.ExitCode == nil || *end.ExitCode != 3 {
		t.Errorf("turn = %s exit %v (%s); want failed with exit code 3, as its status file says", end.State, deref2(end.ExitCode), end.Reason)
	}
	if evs, _ := f.st.ListEvents(ctx, se.ID, 0, 10); len(evs) != 3 || evs[1].Type != "hello" {
		t.Errorf("events %v, want turn.started, the turn's line, turn.finished", evs)
	}
	f.sbs.mu.Lock()
	defer f.sbs.mu.Unlock()
	polls, reads := 0, 0
	for _, c := range f.sbs.cmds {
		polls += strings.Count(c, " turn-poll ")
		reads += strings.Count(c, " turn-dir read ")
	}
	if polls != 1 || reads < 2 {
		t.Errorf("%d turn-poll and %d turn-dir read commands; want turn-poll asked once, then turn-dir read", polls, reads)
	}
}

// startLegacyTurn starts a turn as a hangar before turn-dir did: its harness writes its run log
// and status file by path, in a 0755 directory under root that a shell made; the store says it
// runs. Its prompt prints one line of type "old" and exits 4.
func startLegacyTurn(t *testing.T, ctx context.Context, f *fixture, sessionID, root string) string {
	t.Helper()
	id := newID("turn_")
	dir := filepath.Join(root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(hangarBin, "harness", "--detach", "--run-log", filepath.Join(dir, "run.log"), "--status-file", filepath.Join(dir, "status.json"),
		"--prompt", `echo '{"type":"old"}'; exit 4`, "--", "bash", "-c", PromptArg).Output()
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	var start uint64
	fmt.Sscan(string(out), &pid, &start)
	now := time.Now().UTC()
	if err := f.st.CreateTurn(ctx, store.Turn{ID: id, SessionID: sessionID, Prompt: "old", State: store.TurnQueued, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.UpdateTurn(ctx, store.TurnUpdate{ID: id, State: store.TurnRunning, Dir: dir, ProcessPID: uint32(pid), ProcessStart: start, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	return id
}

// checkLegacyTurnEnd checks that startLegacyTurn's turn ended as its status file says, with its
// line recorded.
func checkLegacyTurnEnd(t *testing.T, ctx context.Context, f *fixture, sessionID, id string) {
	t.Helper()
	end := waitTurn(t, ctx, f.st, id)
	if end.State != store.TurnFailed || end.ExitCode == nil || *end.ExitCode != 4 {
		t.Errorf("turn = %s exit %v (%s); want failed with exit code 4, as its status file says", end.State, deref2(end.ExitCode), end.Reason)
	}
	evs, _ := f.st.ListEvents(ctx, sessionID, 0, 10)
	if len(evs) == 0 || evs[0].Type != "old" {
		t.Errorf("events %v, want the turn's line first", evs)
	}
}
