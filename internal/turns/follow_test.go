package turns

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/internal/runlogtest"
	"github.com/hangar-dev/hangar/internal/stream"
)

// follow turns following on, with a stream registry for the followers to count in.
func (f *fixture) follow() {
	f.cfg.Follow = true
	f.streams = stream.New(stream.Config{Clock: f.clock})
	f.cfg.Streams = f.streams
}

// TestFollowRecordsAsWritten: with following on, lines are recorded as the agent writes them
// while the poll clock stands still; the turn ends once the status file is seen.
func TestFollowRecordsAsWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.follow()
	f.sbs.follows = make(chan string, 16)
	s := New(f.cfg) // no clock driver: polling never fires on its own
	defer s.Close()
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate1, gate2 := filepath.Join(dir, "gate1"), filepath.Join(dir, "gate2")
	prompt := fmt.Sprintf(`while [ ! -e %[1]q ]; do sleep 0.01; done; echo '{"type":"one"}'; while [ ! -e %[2]q ]; do sleep 0.01; done; echo '{"type":"two"}'`, gate1, gate2)
	tu, err := s.StartTurn(ctx, ada, "s1", prompt)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.sbs.follows:
	case <-ctx.Done():
		t.Fatal("the watcher never started following")
	}
	os.WriteFile(gate1, nil, 0o644)
	waitEvents(t, ctx, f.st, se.ID, 2) // turn.started, one
	os.WriteFile(gate2, nil, 0o644)
	waitEvents(t, ctx, f.st, se.ID, 3)
	// The status check runs on the clock: move it until the turn ends.
	waitFor(t, ctx, "the turn to end", func() bool {
		tt, _ := f.st.GetTurn(ctx, tu.ID)
		if tt.State == "done" {
			return true
		}
		f.clock.Advance(f.cfg.PollInterval)
		return false
	})
	waitTurn(t, ctx, f.st, tu.ID)
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n"))
}

// TestFollowBreaksThenResumes: a follow that breaks mid-log leaves the rest to polling, and
// following starts again; every line is recorded once, in order.
func TestFollowBreaksThenResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	log := filepath.Join(runlogtest.Dir(t), "codex_exec_edit_file-change_failed-command.jsonl")
	f := newFixture(t)
	f.follow()
	f.sbs.follows = make(chan string, 64)
	f.sbs.breakAfter = 2
	s := f.service(t) // the clock moves whenever a watcher waits: polling runs too
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate1, gate2 := filepath.Join(dir, "gate1"), filepath.Join(dir, "gate2")
	prompt := fmt.Sprintf(`while [ ! -e %[1]q ]; do sleep 0.01; done; head -n 12 %[3]q; while [ ! -e %[2]q ]; do sleep 0.01; done; tail -n +13 %[3]q`, gate1, gate2, log)
	tu, err := s.StartTurn(ctx, ada, "s1", prompt)
	if err != nil {
		t.Fatal(err)
	}
	for _, gate := range []string{gate1, gate2} {
		select { // a follow runs: the lines the gate lets out reach it, and it breaks
		case <-f.sbs.follows:
		case <-ctx.Done():
			t.Fatal("no follow started")
		}
		os.WriteFile(gate, nil, 0o644)
	}
	waitTurn(t, ctx, f.st, tu.ID)
	want, _ := os.ReadFile(log)
	checkEvents(t, ctx, f.st, se.ID, want)
}

// TestFollowCap: past FollowMaxBytes a turn's log is no longer followed; polling records the
// rest, every line once.
func TestFollowCap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	log := filepath.Join(runlogtest.Dir(t), "claude_error-max-turns_one-bash-call.jsonl")
	f := newFixture(t)
	f.follow()
	f.cfg.FollowMaxBytes = 100
	f.sbs.follows = make(chan string, 64)
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	tu, err := s.StartTurn(ctx, ada, "s1", fmt.Sprintf(`while [ ! -e %q ]; do sleep 0.01; done; `, gate)+replayPrompt(log))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.sbs.follows:
	case <-ctx.Done():
		t.Fatal("no follow started")
	}
	os.WriteFile(gate, nil, 0o644) // the first line (over 100 bytes) reaches the follow: the cap
	waitTurn(t, ctx, f.st, tu.ID)
	want, _ := os.ReadFile(log)
	checkEvents(t, ctx, f.st, se.ID, want)
	if n := len(f.sbs.follows); n != 0 {
		t.Errorf("%d more follows started after the cap, want none", n)
	}
}

// TestFollowWhenTheRegistryIsFull: with HANGAR_STREAM_MAX_TOTAL reached, a run log is not
// followed (a follower would be one stream more) but polled; every line is recorded once.
func TestFollowWhenTheRegistryIsFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	log := filepath.Join(runlogtest.Dir(t), "codex_exec_edit_file-change_failed-command.jsonl")
	f := newFixture(t)
	f.follow()
	f.streams = stream.New(stream.Config{MaxTotal: 1, Clock: f.clock})
	f.cfg.Streams = f.streams
	other, err := f.streams.Open(ctx, stream.Options{Kind: stream.KindEvents, Principal: ada})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	f.sbs.follows = make(chan string, 64)
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s1", replayPrompt(log))
	if err != nil {
		t.Fatal(err)
	}
	waitTurn(t, ctx, f.st, tu.ID)
	want, _ := os.ReadFile(log)
	checkEvents(t, ctx, f.st, se.ID, want)
	if n := len(f.sbs.follows); n != 0 {
		t.Errorf("%d follows started with the registry full, want none", n)
	}
}
