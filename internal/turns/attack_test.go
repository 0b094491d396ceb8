package turns

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/store"
)

// swapAttack is a split agent's prompt (issue 27's first finding): it makes the places plain
// turns' directories went, /tmp/hangar-turns and /var/lib/hangar/turns, before hangar does
// and opens them to all, says ready, then until /tmp/gate exists swaps every turn directory it
// finds there for one of its own whose run log and status file say the turn was done, exit 0,
// summary "forged" (and writes that status again and again, over the harness's own).
const swapAttack = pauseFD + `for r in /tmp/hangar-turns /var/lib/hangar/turns; do mkdir -p $r 2>/dev/null && chmod 777 $r; done
echo '{"type":"ready"}'
forged='{"exit_code":0,"summary":{"result":"forged"}}'
swap() {
  mv "$1" "$1.real" 2>/dev/null || return 0
  mkdir "$1" && cp "$1.real/prompt" "$1/" 2>/dev/null
  echo '{"type":"forged"}' > "$1/run.log"
  echo "$forged" > "$1/status.json"
  touch "$1/.forged"; chmod -R 777 "$1"
  echo "{\"type\":\"swapped\",\"dir\":\"$1\"}"
}
while [ ! -e /tmp/gate ]; do
  for d in /tmp/hangar-turns/turn_* /var/lib/hangar/turns/turn_*; do
    case "$d" in *'*'|*.real) continue;; esac
    if [ -e "$d/.forged" ]; then echo "$forged" > "$d/status.json"; else swap "$d"; fi
  done
  read -t 0.005 -u 9 || :
done`

// TestSplitAgentCannotForgeAnotherTurn reproduces issue 27's first finding in a Docker sandbox:
// a split session's agent (uid 65534) makes the turns' root first, opens it to all and swaps
// each new turn directory for its own run log and status file. A plain session's turn in the
// same sandbox, which prints 5 lines and exits 7, is still recorded with its 5 lines and exit
// code 7: its directory is made by hangar's binary where that uid can make nothing, and it
// never sees it.
func TestSplitAgentCannotForgeAnotherTurn(t *testing.T) {
	t.Parallel()
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newDaemonFixture(t, "docker")
	s := f.realClock(t)
	mallory, err := s.CreateSession(ctx, admin, CreateSessionRequest{Name: "mallory", Sandbox: f.sb.Name, Agent: "command", Split: true, SplitUID: 65534})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.CreateSession(ctx, admin, CreateSessionRequest{Name: "plain", Sandbox: f.sb.Name, Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := s.StartTurn(ctx, admin, "mallory", swapAttack)
	if err != nil {
		t.Fatal(err)
	}
	defer f.run(t, context.Background(), "touch /tmp/gate")
	waitFor(t, ctx, "the split agent's ready", func() bool {
		evs, _ := f.st.ListEvents(ctx, mallory.ID, 0, 100)
		for _, e := range evs {
			if e.Type == "ready" {
				return true
			}
		}
		return false
	})
	pt, err := s.StartTurn(ctx, admin, "plain", `for i in 1 2 3 4 5; do echo "{\"type\":\"line\",\"n\":$i}"; done; exit 7`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, pt.ID)
	f.run(t, ctx, "touch /tmp/gate")
	waitTurn(t, ctx, f.st, mt.ID)

	if end.State != store.TurnFailed || end.ExitCode == nil || *end.ExitCode != 7 || strings.Contains(end.Summary, "forged") {
		t.Errorf("plain turn = %s exit %v summary %s (%s); want failed with exit code 7, as its harness says", end.State, deref2(end.ExitCode), end.Summary, end.Reason)
	}
	evs, err := f.st.ListEvents(ctx, plain.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, e := range evs {
		switch e.Type {
		case "line":
			var v struct{ N int }
			json.Unmarshal(e.Data, &v)
			lines = append(lines, v.N)
		case "forged":
			t.Errorf("the plain turn recorded the split agent's line: %s", e.Data)
		}
	}
	if len(lines) != 5 {
		t.Errorf("the plain turn recorded lines %v, want its own 5", lines)
	}
	mevs, _ := f.st.ListEvents(ctx, mallory.ID, 0, 100)
	for _, e := range mevs {
		if e.Type == "swapped" {
			t.Errorf("the split agent swapped a turn directory: %s", e.Data)
		}
	}
	if !strings.HasPrefix(end.Dir, "/var/lib/hangar/turns/") {
		t.Errorf("plain turn's directory %s, want under /var/lib/hangar/turns (root's)", end.Dir)
	}
}

// needDocker skips a test without a Docker engine, loudly (and fails it in CI, which has one).
func needDocker(t *testing.T) {
	t.Helper()
	if dockerEngineUp() {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Docker engine answers, and CI always starts one")
	}
	t.Skip("SKIPPING: no Docker engine answers here; start dockerd to run the Docker turn tests")
}

// realClock is a Service of f's on the real clock, polling every 100 ms if it comes to that:
// for a test that waits for turns' ends without driving f's mock clock.
func (f *daemonFixture) realClock(t *testing.T) *Service {
	cfg := f.cfg
	cfg.Clock, cfg.PollInterval = quartz.NewReal(), 100*time.Millisecond
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

// TestLocalHangarsTurnTreesApart: two hangars on one machine (two data dirs) each keep their
// local sandboxes' turns in their own tree, in the sandbox's folder under the data dir, 0700,
// never in a directory of the machine they share.
func TestLocalHangarsTurnTreesApart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var dirs []string
	for range 2 {
		f := newDaemonFixture(t, "local")
		s := f.realClock(t)
		if _, err := s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s", Sandbox: f.sb.Name, Agent: "command"}); err != nil {
			t.Fatal(err)
		}
		tu, err := s.StartTurn(ctx, admin, "s", `echo '{"type":"hello"}'`)
		if err != nil {
			t.Fatal(err)
		}
		end := waitTurn(t, ctx, f.st, tu.ID)
		if end.State != store.TurnDone {
			t.Fatalf("turn %s: %s (%s)", tu.ID, end.State, end.Reason)
		}
		tree := filepath.Join(f.sb.Data["folder"], "turns")
		if filepath.Dir(end.Dir) != tree {
			t.Errorf("turn directory %s, want in %s, the sandbox's folder under its hangar's data dir", end.Dir, tree)
		}
		for _, d := range []string{tree, end.Dir} {
			if fi, err := os.Lstat(d); err != nil {
				t.Error(err)
			} else if fi.Mode() != fs.ModeDir|0o700 {
				t.Errorf("%s: %v; want a directory, mode 0700", d, fi.Mode())
			}
		}
		dirs = append(dirs, end.Dir)
	}
	if filepath.Dir(dirs[0]) == filepath.Dir(dirs[1]) {
		t.Errorf("two hangars' turns share %s", filepath.Dir(dirs[0]))
	}
}

// TestTurnDirOpenedFailsLoudly: a turn whose directory stops being hangar's alone while it runs
// (here its own agent opens it to all, as a plain agent may) is not read on: it ends failed with
// a reason that says so, and its harness is ended.
func TestTurnDirOpenedFailsLoudly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s", `d=$(tr '\0' '\n' < /proc/$PPID/cmdline | sed -n '/^--turn-dir$/{n;p;q}'); chmod 777 "$d"; echo '{"type":"opened"}'; exec sleep 600`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnFailed || !strings.Contains(end.Reason, "not hangar's alone") || !strings.Contains(end.Reason, "writable by group or others") {
		t.Errorf("turn = %s (%s); want failed, saying its directory is not hangar's alone", end.State, end.Reason)
	}
	waitFor(t, ctx, "the harness's end", func() bool {
		return errors.Is(syscall.Kill(int(end.ProcessPID), 0), syscall.ESRCH)
	})
}

// TestResumeLegacyTurnDir: a turn an earlier hangar started, whose directory it made with a
// shell in /tmp/hangar-turns (0755, the run log and status file written by paths), is still
// read where it is after a restart, through the same checks, and ends as its status file says.
func TestResumeLegacyTurnDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	se, err := New(f.cfg).CreateSession(ctx, ada, CreateSessionRequest{Name: "old", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	id := startLegacyTurn(t, ctx, f, se.ID, filepath.Join(t.TempDir(), "hangar-turns"))
	s := f.service(t)
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	checkLegacyTurnEnd(t, ctx, f, se.ID, id)
}
