package fleet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/wire"
)

// turnWith gives session id (made with e.session) a new turn with prompt, running since now.
func (e *env) turnWith(t *testing.T, id, turn, prompt string) {
	t.Helper()
	now := e.clock.Now()
	if err := e.st.CreateTurn(context.Background(), store.Turn{ID: turn, SessionID: id, Prompt: prompt, State: store.TurnRunning,
		CreatedAt: now, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// unitOf reads ada's fleet and returns its unit id, and the fleet.
func (e *env) unitOf(t *testing.T, id string) (Unit, Fleet) {
	t.Helper()
	f, err := e.s.Read(context.Background(), ada, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range f.Agents {
		if u.ID == id {
			return u, f
		}
	}
	t.Fatalf("no unit %s in %+v", id, f.Agents)
	return Unit{}, f
}

// TestRowSaysWhatHowLongWhatNow: a unit carries its task (the prompt's first line that is not
// blank, cut), when its turn started and ended, when its last event came, and its cost or
// tokens.
func TestRowSaysWhatHowLongWhatNow(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.session(t, "s1", "ada", "box", store.TurnDone)
	e.clock.Advance(time.Minute).MustWait(ctx)
	started := e.clock.Now()
	e.turnWith(t, "s1", "turn_2", "\n  Fix the flaky test in store_test.go  \nThen run go test ./... and commit.")
	u, _ := e.unitOf(t, "s1")
	if u.Task != "Fix the flaky test in store_test.go" || u.Turn.StartedAt == nil || !time.Time(*u.Turn.StartedAt).Equal(started) ||
		u.EndedAt != nil || u.LastActivityAt != nil || u.Tokens != nil {
		t.Errorf("running, no event yet: %+v (turn %+v)", u, u.Turn)
	}
	e.clock.Advance(30 * time.Second).MustWait(ctx)
	e.appendLines(t, "s1", "turn_2", `{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":0,"output_tokens":34}}`)
	e.appendLines(t, "s1", "turn_2", `{"type":"turn.completed","usage":{"input_tokens":800,"cached_input_tokens":0,"output_tokens":6}}`)
	e.clock.Advance(90 * time.Second).MustWait(ctx)
	e.endTurn(t, "turn_2", store.TurnDone)
	u, _ = e.unitOf(t, "s1")
	if u.Tokens == nil || *u.Tokens != (Tokens{Input: 2000, Output: 40}) || u.CostUSD != 0 {
		t.Errorf("tokens %+v, cost %v; want Codex's counts summed, no cost", u.Tokens, u.CostUSD)
	}
	if u.EndedAt == nil || time.Time(*u.EndedAt).Sub(time.Time(*u.Turn.StartedAt)) != 2*time.Minute {
		t.Errorf("ended %v, started %v; want a turn of 2 minutes", u.EndedAt, u.Turn.StartedAt)
	}
	if u.LastActivityAt == nil || !time.Time(*u.LastActivityAt).Equal(started.Add(30*time.Second)) {
		t.Errorf("last activity %v, want the usage lines' time", u.LastActivityAt)
	}
	e.turnWith(t, "s1", "turn_3", strings.Repeat("é", 150))
	e.appendLines(t, "s1", "turn_3", `{"type":"turn.started"}`) // as turns records a turn's start
	if u, _ := e.unitOf(t, "s1"); len([]rune(u.Task)) != taskText+1 || !strings.HasSuffix(u.Task, "…") || u.EndedAt != nil {
		t.Errorf("a long prompt's task = %q (%d runes), ended %v; want it cut to %d and an ellipsis, not ended", u.Task, len([]rune(u.Task)), u.EndedAt, taskText)
	}
}

// TestInboxSaysWhatNeedsYou: each rule of the inbox, as a person reads it.
func TestInboxSaysWhatNeedsYou(t *testing.T) {
	e := newEnv(t, Config{StuckAfter: 10 * time.Minute})
	ctx := context.Background()
	e.session(t, "quiet", "ada", "box", store.TurnRunning, toolCall)
	e.session(t, "chat", "ada", "box", store.TurnRunning)
	e.session(t, "stop", "ada", "box", store.TurnRunning)
	for _, j := range []struct{ id, state string }{{"job_ok", store.TurnDone}, {"job_bad", store.TurnFailed}} {
		jt := e.session(t, "js-"+j.id, "ada", "box", j.state)
		if err := e.st.CreateJob(ctx, store.Job{ID: j.id, TokenID: "tok_ada", Owner: "ada", Sandbox: "box", SessionID: "js-" + j.id, TurnID: jt.ID, CreatedAt: e.now}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(10 * time.Minute).MustWait(ctx)
	e.endTurn(t, "turn_chat", store.TurnDone)
	e.endTurn(t, "turn_stop", store.TurnCancelled)
	_, f := e.unitOf(t, "quiet")
	items := map[string]InboxItem{}
	for _, it := range f.Inbox {
		items[it.Kind+" "+it.Agent] = it
	}
	for _, want := range []InboxItem{
		{Kind: "stuck", Agent: "quiet", State: "running", Text: "n-quiet looks stuck: nothing from it for over 10 min"},
		{Kind: "turn_done", Agent: "chat", State: "done", Text: "n-chat is done, waiting for you: p"},
		{Kind: "job_finished", Agent: "job_ok", State: "done", Text: "Job job_ok is done: p"},
		{Kind: "job_finished", Agent: "job_bad", State: "failed", Text: "Job job_bad failed: exit status 1"},
	} {
		got, ok := items[want.Kind+" "+want.Agent]
		if !ok || got.State != want.State || got.Text != want.Text {
			t.Errorf("%s of %s = %+v, want state %q, text %q", want.Kind, want.Agent, got, want.State, want.Text)
		}
	}
	if _, ok := items["turn_done stop"]; ok || len(items) != 5 { // and the failed sandbox
		t.Errorf("inbox %+v; a cancelled turn is the person's own doing, not an item", f.Inbox)
	}
	if f.Summary.ByState["running"] != 0 || f.Summary.ByState["stuck"] != 1 || f.Summary.Stuck != 1 {
		t.Errorf("summary %+v; want the stuck agent once, as stuck", f.Summary)
	}
	// It speaks again, falls silent again: a new item, not the one a person may have dismissed.
	e.appendLines(t, "quiet", "turn_quiet", toolCall)
	if _, f := e.unitOf(t, "quiet"); len(f.Inbox) != 4 {
		t.Errorf("after it spoke: %+v, want no stuck item", f.Inbox)
	}
	e.clock.Advance(10 * time.Minute).MustWait(ctx)
	_, f = e.unitOf(t, "quiet")
	if i := slices.IndexFunc(f.Inbox, func(it InboxItem) bool { return it.Kind == "stuck" }); i < 0 || f.Inbox[i].ID == items["stuck quiet"].ID {
		t.Errorf("silent again: %+v, want a new stuck item (not %s)", f.Inbox, items["stuck quiet"].ID)
	}
}

// TestProcessItems: a process that failed is an item named by the command its person gave; one
// killed on purpose is not, nor one that exited 0.
func TestProcessItems(t *testing.T) {
	e := newEnv(t, Config{})
	code := func(c int) *int { return &c }
	ended := e.now.Add(-time.Minute)
	ps := []process.Info{
		{ID: "p_make", Sandbox: "box", Command: "make test", State: process.StateExited, ExitCode: code(2), Status: "exit status 2", EndedAt: ended},
		{ID: "p_sh", Sandbox: "box", Command: wire.LoginShell, PTY: true, State: process.StateExited, ExitCode: code(3), Status: "exit status 3", EndedAt: ended},
		{ID: "p_sig", Sandbox: "box", Command: "sleep 1000", State: process.StateExited, ExitCode: code(-1), Status: "signal: segmentation fault", EndedAt: ended},
		{ID: "p_killed", Sandbox: "box", Command: "sleep 1000", State: process.StateExited, ExitCode: code(-1), Status: "signal: terminated", Killed: true, EndedAt: ended},
		{ID: "p_closed", Sandbox: "box", Command: wire.LoginShell, PTY: true, State: process.StateExited, ExitCode: code(129), Killed: true, EndedAt: ended},
		{ID: "p_ok", Sandbox: "box", Command: "true", State: process.StateExited, ExitCode: code(0), EndedAt: ended},
		{ID: "p_run", Sandbox: "box", Command: "sleep 1000", State: process.StateRunning},
	}
	var got []string
	for _, it := range e.s.processItems(ps, e.now) {
		got = append(got, it.ID+" "+it.Text)
	}
	want := []string{
		"process_failed:p_make make test (p_make in box) exited with code 2",
		"process_failed:p_sh A login shell (p_sh in box) exited with code 3",
		"process_failed:p_sig sleep 1000 (p_sig in box) ended: signal: segmentation fault",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("items:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
