package turns

import (
	"context"
	"encoding/json"
	"errors"
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
	t.Parallel()
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
	prompt := waitGate(gate1) + `echo '{"type":"one"}'; ` + waitGate(gate2) + `echo '{"type":"two"}'`
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
		// Each move waits for the timers it fires: a next move while one is still being
		// fired finds it due now and fails ("cannot advance ... beyond next event in 0s").
		f.clock.Advance(f.cfg.PollInterval).MustWait(ctx)
		return false
	})
	waitTurn(t, ctx, f.st, tu.ID)
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n"))
}

// TestFollowBreaksThenResumes: a follow that breaks mid-log leaves the rest to polling, and
// following starts again; every line is recorded once, in order.
func TestFollowBreaksThenResumes(t *testing.T) {
	t.Parallel()
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
	prompt := waitGate(gate1) + fmt.Sprintf("head -n 12 %q; ", log) + waitGate(gate2) + fmt.Sprintf("tail -n +13 %q", log)
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
	t.Parallel()
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
	tu, err := s.StartTurn(ctx, ada, "s1", waitGate(gate)+replayPrompt(log))
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
	t.Parallel()
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

// TestEventsEndWithTheSandbox: a session's events stream ends once its sandbox has failed (or
// was destroyed) and none of its turns runs — after the turn still running has ended and its
// turn.finished was sent, never before; a stream opened on such a session sends what there is
// and ends at once. Without the check it stayed open for good, waiting for events that could
// not come.
func TestEventsEndWithTheSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.cfg.Streams = stream.New(stream.Config{Clock: f.clock})
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
	setSandboxState(t, ctx, f, "box", "failed")
	st, err := s.Follow(ctx, ada, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f.cfg.Streams.EndSandbox("box", stream.ReasonFailed) // as the sandbox's Manager does
	// The turn runs on (its harness outlived the daemon): the stream stays open meanwhile.
	if got := readEvents(t, ctx, st, 2); len(got) != 2 {
		t.Fatalf("read %d events before the turn ended, want 2", len(got))
	}
	if r := st.Reason(); r != "" {
		t.Fatalf("the stream ended (%s) while a turn ran", r)
	}
	os.WriteFile(gate, nil, 0o644)
	waitTurn(t, ctx, f.st, tu.ID)
	rest, why := drainEvents(t, ctx, st)
	if len(rest) == 0 || rest[len(rest)-1] != TypeTurnFinished || why != stream.ReasonFailed {
		t.Errorf("after the turn: events %v, ended %q; want ... turn.finished, then failed", rest, why)
	}

	for _, c := range []struct {
		state string
		want  stream.Reason
	}{{"failed", stream.ReasonFailed}, {"destroyed", stream.ReasonDestroyed}} {
		setSandboxState(t, ctx, f, "box", c.state)
		late, err := s.Follow(ctx, ada, "s1", 0)
		if err != nil {
			t.Fatal(err)
		}
		evs, why := drainEvents(t, ctx, late)
		late.Close()
		if len(evs) < 4 || why != c.want {
			t.Errorf("a stream opened on a %s sandbox's session: %d events, ended %q; want all, then %s", c.state, len(evs), why, c.want)
		}
	}
}

func setSandboxState(t *testing.T, ctx context.Context, f *fixture, name, state string) {
	t.Helper()
	sb, err := f.st.GetSandbox(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sb.State = state
	if err := f.st.UpdateSandbox(ctx, sb); err != nil {
		t.Fatalf("set sandbox %s %s: %v", name, state, err)
	}
}

// readEvents reads n events' types from st.
func readEvents(t *testing.T, ctx context.Context, st *stream.Stream, n int) []string {
	t.Helper()
	var types []string
	for len(types) < n {
		items, err := st.Next(ctx, 0)
		if err != nil {
			t.Fatalf("after %v: %v", types, err)
		}
		for _, it := range items {
			types = append(types, eventType(t, it.Data))
		}
	}
	return types
}

// drainEvents reads st's events' types to its end, and why it ended.
func drainEvents(t *testing.T, ctx context.Context, st *stream.Stream) ([]string, stream.Reason) {
	t.Helper()
	var types []string
	for {
		items, err := st.Next(ctx, 0)
		var ended *stream.Ended
		switch {
		case errors.As(err, &ended):
			return types, ended.Reason
		case err != nil:
			t.Fatalf("after %v: %v", types, err)
		}
		for _, it := range items {
			types = append(types, eventType(t, it.Data))
		}
	}
}

func eventType(t *testing.T, data []byte) string {
	var e struct{ Type string }
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("event %s: %v", data, err)
	}
	return e.Type
}
