package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
)

// needRoot skips a split test unless it runs as root (CI does: there it must run).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: the split tests must run")
		}
		t.Skip("SKIPPING: split sessions need root")
	}
}

// splitAttack is a split agent's prompt: it finds its turn's directory (on its harness's
// command line), tries to enter it, to forge the status file and the run log, to move the
// directory away and to make the next turn's in advance, prints a fake turn.finished and its
// findings, then waits for gate and exits 3.
func splitAttack(root, gate string) string {
	return fmt.Sprintf(`d=$(tr '\0' '\n' < /proc/$PPID/cmdline | sed -n '/^--turn-dir$/{n;p;q}')
case "$d" in %[1]s/turn_*) ;; *) echo "no turn dir: $d"; exit 9;; esac
try() { if eval "$2" 2>/dev/null; then r=ok; else r=refused; fi; printf '{"type":"try","try":"%%s","got":"%%s"}\n' "$1" "$r"; }
try enter 'cd "$d"'
try overwrite 'echo "{\"exit_code\":0,\"summary\":{\"result\":\"forged\"}}" > "$d/status.json"'
try replace 'echo "{\"exit_code\":0}" > /tmp/s.$$ && mv /tmp/s.$$ "$d/status.json"'
try link 'ln -s /dev/null "$d/status.json"'
try append 'echo "{\"type\":\"turn.finished\",\"status\":\"done\",\"exit_code\":0}" >> "$d/run.log"'
try swap 'mv "$d" "$d.old"'
try precreate 'mkdir %[1]s/turn_next'
rm -f /tmp/s.$$
printf '{"type":"turn.finished","status":"done","exit_code":0}\n'
echo '{"type":"forged"}'
%[2]sexit 3`, root, waitGate(gate))
}

// TestSplitAgentCannotForgeItsEnd runs a split session's turn on this machine as the local
// provider does (as root): the agent, as uid 65534, tries to write its turn's status file and
// to pass for hangar's turn.finished, and waits while the watcher reads the status twice. The
// turn still ends as the harness says: failed, exit code 3.
func TestSplitAgentCannotForgeItsEnd(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	root, err := os.MkdirTemp("", "turns-split-*") // in /tmp, root's, reachable by the agent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	f.cfg.SplitRunRoot = filepath.Join(root, "turns")
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command", Split: true, SplitUID: 65534})
	if err != nil {
		t.Fatal(err)
	}
	if !se.Split || se.SplitUID != 65534 {
		t.Fatalf("session = %+v, want split as 65534", se)
	}
	gate := filepath.Join(root, "gate")
	defer os.WriteFile(gate, nil, 0o644)
	tu, err := s.StartTurn(ctx, ada, "s1", splitAttack(f.cfg.SplitRunRoot, gate))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the agent's attempts", func() bool {
		evs, _ := f.st.ListEvents(ctx, se.ID, 0, 100)
		return len(evs) > 0 && evs[len(evs)-1].Type == "forged"
	})
	// Two more reads of the status file: the first began after the attempts, so it has been
	// taken in once the second begins (a watcher reads one at a time), unless it ended the turn.
	reads := func() int {
		f.sbs.mu.Lock()
		defer f.sbs.mu.Unlock()
		n := 0
		for _, c := range f.sbs.cmds {
			if strings.Contains(c, " turn-poll ") || strings.Contains(c, "status.json") && !strings.Contains(c, "harness") {
				n++
			}
		}
		return n
	}
	n := reads()
	waitFor(t, ctx, "two status reads", func() bool {
		tt, _ := f.st.GetTurn(ctx, tu.ID)
		return reads() >= n+2 || store.TurnEnded(tt.State)
	})
	os.WriteFile(gate, nil, 0o644)
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnFailed || end.ExitCode == nil || *end.ExitCode != 3 || strings.Contains(end.Summary, "forged") {
		t.Errorf("turn = %s exit %v summary %s; want failed with exit code 3, as the harness says", end.State, deref2(end.ExitCode), end.Summary)
	}
	if !strings.HasPrefix(end.Dir, f.cfg.SplitRunRoot+"/") {
		t.Errorf("turn dir %s, want under the split run root %s", end.Dir, f.cfg.SplitRunRoot)
	}
	evs, err := f.st.ListEvents(ctx, se.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	finished, tries := 0, 0
	for _, e := range evs {
		var v struct{ Try, Got, Status string }
		json.Unmarshal(e.Data, &v)
		switch {
		case e.Type == "try":
			if tries++; v.Got != "refused" {
				t.Errorf("the agent's %q: %s, want refused", v.Try, v.Got)
			}
		case e.Type == TypeTurnFinished:
			finished++
			if v.Status != "failed" {
				t.Errorf("turn.finished says %s, want failed", v.Status)
			}
		}
	}
	if tries != 7 {
		t.Errorf("%d attempts recorded, want 7", tries)
	}
	if finished != 1 || evs[len(evs)-1].Type != TypeTurnFinished {
		t.Errorf("%d turn.finished events, the last event %s; want hangar's one, last", finished, evs[len(evs)-1].Type)
	}
}

func deref2(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestSplitNeedsRoot: a split session in a sandbox whose commands do not run as root is refused
// with a reason (its harness could not run the agent as another uid).
func TestSplitNeedsRoot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.sbs.uid = "1000"
	s := f.service(t)
	_, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command", Split: true})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("CreateSession(split, not root) = %v, want ErrInvalid naming the uid", err)
	}
	_, err = s.CreateJob(ctx, ada, JobRequest{Prompt: "true", Agent: "command", Sandbox: "box", Split: true})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("CreateJob(split, not root) = %v, want ErrInvalid", err)
	}
}

// twoResultsLog is the log in which Claude Code printed two results (a background task finished
// after the first).
const twoResultsLog = "claude_ruff-fix_background-task_two-results.jsonl"

// checkTwoResults checks the turn that replayed twoResultsLog (TestTurnReplaysFixtures): both
// results are recorded as events, the turn ends once, after the second, and its summary counts
// both and keeps the last one's text.
func checkTwoResults(t *testing.T, end store.Turn, evs []store.Event) {
	t.Helper()
	var results []int64
	lastResult := ""
	for _, e := range evs {
		if e.Type == "result" {
			results = append(results, e.Seq)
			var r struct{ Result string }
			json.Unmarshal(e.Data, &r)
			lastResult = r.Result
		}
	}
	if len(results) != 2 {
		t.Fatalf("%d result events, want 2", len(results))
	}
	var sum Summary
	if err := json.Unmarshal([]byte(end.Summary), &sum); err != nil {
		t.Fatalf("summary %q: %v", end.Summary, err)
	}
	if end.State != store.TurnDone || sum.Results != 2 || sum.Result != cutText(lastResult) {
		t.Errorf("turn %s, summary results=%d result=%.60q; want done, 2, the second's %.60q", end.State, sum.Results, sum.Result, lastResult)
	}
	if fin := evs[len(evs)-1]; fin.Type != TypeTurnFinished || fin.Seq <= results[1] {
		t.Errorf("last event %s (seq %d), want turn.finished after the second result (seq %d)", fin.Type, fin.Seq, results[1])
	}
}

// cutText is a result's text as a summary keeps it (cut to its bound).
func cutText(text string) string {
	line, _ := json.Marshal(map[string]any{"type": "result", "result": text})
	var sum Summary
	sum.Add(Classify(line))
	return sum.Result
}
