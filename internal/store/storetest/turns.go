package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func newSession(id, name, owner string) store.Session {
	return store.Session{
		ID: id, Name: name, Owner: owner, TokenID: "tok_1", Sandbox: "box", Agent: "claude-code",
		Env: map[string]string{"ANTHROPIC_API_KEY": "sk-x"}, CreatedAt: time.UnixMilli(time.Now().UnixMilli()),
	}
}

func newTurn(id, session string, created time.Time) store.Turn {
	return store.Turn{ID: id, SessionID: session, Prompt: "fix the tests", State: store.TurnQueued, CreatedAt: created}
}

func mustCreateSession(t *testing.T, ctx context.Context, s store.Store, se store.Session) {
	t.Helper()
	if err := s.CreateSession(ctx, se); err != nil {
		t.Fatalf("CreateSession %s: %v", se.Name, err)
	}
}

func mustCreateTurn(t *testing.T, ctx context.Context, s store.Store, tu store.Turn) {
	t.Helper()
	if err := s.CreateTurn(ctx, tu); err != nil {
		t.Fatalf("CreateTurn %s: %v", tu.ID, err)
	}
}

func testSessions(t *testing.T, ctx context.Context, s store.Store) {
	a, b := newSession("ses_a", "alpha", "ada"), newSession("ses_b", "beta", "bob")
	mustCreateSession(t, ctx, s, b)
	mustCreateSession(t, ctx, s, a)
	if err := s.CreateSession(ctx, newSession("ses_c", "alpha", "ada")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateSession with a name its owner has = %v, want ErrConflict", err)
	}
	if err := s.CreateSession(ctx, newSession("ses_a", "gamma", "ada")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateSession with a taken id = %v, want ErrConflict", err)
	}
	// Names are unique per owner: bob may have an "alpha" too, split.
	bobAlpha := newSession("ses_d", "alpha", "bob")
	bobAlpha.Split, bobAlpha.SplitUID = true, 1000
	mustCreateSession(t, ctx, s, bobAlpha)
	for _, c := range []struct{ owner, ref string }{{"ada", "ses_a"}, {"ada", "alpha"}, {"", "ses_a"}, {"bob", "ses_a"}} {
		got, err := s.GetSession(ctx, c.owner, c.ref)
		if err != nil {
			t.Fatalf("GetSession(%q, %s): %v", c.owner, c.ref, err)
		}
		if got.ID != "ses_a" || got.Name != "alpha" || got.Owner != "ada" || got.TokenID != "tok_1" || got.Sandbox != "box" ||
			got.Agent != "claude-code" || got.Env["ANTHROPIC_API_KEY"] != "sk-x" || !got.CreatedAt.Equal(a.CreatedAt) || got.LastSeq != 0 || got.Split {
			t.Errorf("GetSession(%q, %s) = %+v, want %+v", c.owner, c.ref, got, a)
		}
	}
	if got, err := s.GetSession(ctx, "bob", "alpha"); err != nil || got.ID != "ses_d" || !got.Split || got.SplitUID != 1000 {
		t.Errorf("GetSession(bob, alpha) = %+v, %v; want bob's, split as uid 1000", got, err)
	}
	for _, c := range []struct{ owner, ref string }{{"ada", "nope"}, {"", "alpha"}, {"cy", "alpha"}, {"ada", "beta"}} {
		if _, err := s.GetSession(ctx, c.owner, c.ref); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetSession(%q, %s) = %v, want ErrNotFound", c.owner, c.ref, err)
		}
	}
	all, err := s.ListSessions(ctx, "")
	if err != nil || len(all) != 3 || all[0].Name != "alpha" || all[1].Name != "alpha" || all[2].Name != "beta" {
		t.Errorf("ListSessions(all) = %+v, %v; want alpha, alpha, beta", all, err)
	}
	mine, err := s.ListSessions(ctx, "bob")
	if err != nil || len(mine) != 2 || mine[0].Name != "alpha" || mine[1].Name != "beta" {
		t.Errorf("ListSessions(bob) = %+v, %v; want alpha, beta", mine, err)
	}

	if err := s.SetSessionEnv(ctx, "ses_d", map[string]string{"K": "sealed"}); err != nil {
		t.Fatalf("SetSessionEnv: %v", err)
	}
	if got, err := s.GetSession(ctx, "", "ses_d"); err != nil || len(got.Env) != 1 || got.Env["K"] != "sealed" {
		t.Errorf("GetSession after SetSessionEnv = %v, %v; want env {K: sealed}", got.Env, err)
	}
	if err := s.SetSessionEnv(ctx, "ses_nope", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetSessionEnv of no session = %v, want ErrNotFound", err)
	}

	mustCreateTurn(t, ctx, s, newTurn("turn_1", "ses_a", a.CreatedAt))
	appendN(t, ctx, s, "ses_a", "turn_1", 3)
	if err := s.DeleteSession(ctx, "ses_a"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if err := s.DeleteSession(ctx, "ses_a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSession twice = %v, want ErrNotFound", err)
	}
	if _, err := s.GetTurn(ctx, "turn_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTurn of a deleted session's turn = %v, want ErrNotFound", err)
	}
	if evs, err := s.ListEvents(ctx, "ses_a", 0, 100); err != nil || len(evs) != 0 {
		t.Errorf("ListEvents of a deleted session = %d events, %v; want none", len(evs), err)
	}
}

func testTurnLifecycle(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	mustCreateSession(t, ctx, s, newSession("ses_a", "alpha", "ada"))
	wantLastTurn(t, ctx, s, "ses_a", "")
	mustCreateTurn(t, ctx, s, newTurn("turn_1", "ses_a", now))
	wantLastTurn(t, ctx, s, "ses_a", store.TurnQueued)
	if err := s.CreateTurn(ctx, newTurn("turn_2", "ses_a", now)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateTurn while one is queued = %v, want ErrConflict", err)
	}
	if err := s.CreateTurn(ctx, newTurn("turn_1", "ses_b", now)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateTurn with a taken id = %v, want ErrConflict", err)
	}
	// Its launch begins once: a second (another replica's) is refused, and the record says so.
	if got, err := s.GetTurn(ctx, "turn_1"); err != nil || got.Launching {
		t.Errorf("a new turn = %+v, %v; want its launch not begun", got, err)
	}
	if err := s.BeginLaunch(ctx, "turn_1"); err != nil {
		t.Fatalf("BeginLaunch: %v", err)
	}
	if err := s.BeginLaunch(ctx, "turn_1"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("BeginLaunch twice = %v, want ErrConflict", err)
	}
	if err := s.BeginLaunch(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("BeginLaunch of no turn = %v, want ErrNotFound", err)
	}
	if active, err := s.ListActiveTurns(ctx); err != nil || len(active) != 1 || active[0].State != store.TurnQueued || !active[0].Launching {
		t.Errorf("ListActiveTurns after BeginLaunch = %+v, %v; want turn_1 queued, launching", active, err)
	}
	started := now.Add(time.Second)
	if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "turn_1", State: store.TurnRunning, Dir: "/tmp/t1", ProcessTag: "hangar:p", ProcessPID: 77, ProcessStart: 1 << 40, StartedAt: started}); err != nil {
		t.Fatalf("UpdateTurn to running: %v", err)
	}
	if err := s.RequestCancel(ctx, "turn_1"); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	if err := s.RequestCancel(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RequestCancel of no turn = %v, want ErrNotFound", err)
	}
	if err := s.BeginLaunch(ctx, "turn_1"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("BeginLaunch of a running turn = %v, want ErrConflict", err)
	}
	if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "turn_1", State: store.TurnRunning}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateTurn running → running = %v, want ErrConflict", err)
	}
	if err := s.CreateTurn(ctx, newTurn("turn_2", "ses_a", now)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateTurn while one runs = %v, want ErrConflict", err)
	}
	active, err := s.ListActiveTurns(ctx)
	if err != nil || len(active) != 1 || active[0].ID != "turn_1" {
		t.Errorf("ListActiveTurns = %+v, %v; want turn_1", active, err)
	}
	code, ended := 1, started.Add(time.Minute)
	if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "turn_1", State: store.TurnFailed, ExitCode: &code, Signal: "", Summary: `{"result":"x"}`, Reason: "exit 1", EndedAt: ended}); err != nil {
		t.Fatalf("UpdateTurn to failed: %v", err)
	}
	for _, st := range []string{store.TurnDone, store.TurnRunning, store.TurnQueued, "nonsense"} {
		if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "turn_1", State: st}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("UpdateTurn failed → %s = %v, want ErrConflict", st, err)
		}
	}
	if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "nope", State: store.TurnDone}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateTurn of no turn = %v, want ErrNotFound", err)
	}
	got, err := s.GetTurn(ctx, "turn_1")
	if err != nil || got.State != store.TurnFailed || got.ExitCode == nil || *got.ExitCode != 1 || got.Summary != `{"result":"x"}` ||
		got.Reason != "exit 1" || got.Dir != "/tmp/t1" || got.ProcessTag != "hangar:p" || got.ProcessPID != 77 || got.ProcessStart != 1<<40 || !got.CancelRequested ||
		!got.StartedAt.Equal(started) || !got.EndedAt.Equal(ended) || !got.CreatedAt.Equal(now) || got.Prompt != "fix the tests" || !got.Launching {
		t.Errorf("GetTurn = %+v, %v", got, err)
	}
	// The session is free again; a turn cancelled while queued gets its start time.
	mustCreateTurn(t, ctx, s, newTurn("turn_2", "ses_a", now.Add(time.Hour)))
	if got, err := s.GetTurn(ctx, "turn_2"); err != nil || got.CancelRequested || got.ProcessStart != 0 {
		t.Errorf("a new turn = %+v, %v; want no cancel asked for, no start time", got, err)
	}
	if err := s.UpdateTurn(ctx, store.TurnUpdate{ID: "turn_2", State: store.TurnCancelled, StartedAt: ended, EndedAt: ended}); err != nil {
		t.Fatalf("UpdateTurn queued → cancelled: %v", err)
	}
	if err := s.RequestCancel(ctx, "turn_2"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("RequestCancel of an ended turn = %v, want ErrConflict", err)
	}
	if err := s.BeginLaunch(ctx, "turn_2"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("BeginLaunch of a cancelled turn = %v, want ErrConflict", err)
	}
	turns, err := s.ListTurns(ctx, "ses_a")
	if err != nil || len(turns) != 2 || turns[0].ID != "turn_1" || turns[1].ID != "turn_2" || turns[1].ExitCode != nil || !turns[1].StartedAt.Equal(ended) {
		t.Errorf("ListTurns = %+v, %v; want turn_1 then turn_2 (cancelled)", turns, err)
	}
	if active, err := s.ListActiveTurns(ctx); err != nil || len(active) != 0 {
		t.Errorf("ListActiveTurns after both ended = %+v, %v; want none", active, err)
	}
	wantLastTurn(t, ctx, s, "ses_a", store.TurnCancelled) // turn_2's, the newer, not turn_1's failed
}

// wantLastTurn fails t unless GetSession and ListSessions both read state as the session's
// LastTurnState.
func wantLastTurn(t *testing.T, ctx context.Context, s store.Store, id, state string) {
	t.Helper()
	if got, err := s.GetSession(ctx, "", id); err != nil || got.LastTurnState != state {
		t.Errorf("GetSession(%s).LastTurnState = %q, %v; want %q", id, got.LastTurnState, err, state)
	}
	all, err := s.ListSessions(ctx, "")
	for _, se := range all {
		if se.ID == id && se.LastTurnState != state {
			t.Errorf("ListSessions: %s's LastTurnState = %q, want %q", id, se.LastTurnState, state)
		}
	}
	if err != nil {
		t.Errorf("ListSessions: %v", err)
	}
}

func testJobs(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	jobs := []store.Job{
		{ID: "job_1", TokenID: "tok_j", Owner: "ada", Sandbox: "box", SandboxCreated: true, SessionID: "ses_1", TurnID: "turn_1", CreatedAt: now},
		{ID: "job_2", TokenID: "tok_k", Owner: "ada", Sandbox: "box", SessionID: "ses_2", TurnID: "turn_2", CreatedAt: now.Add(time.Second)},
		{ID: "job_3", TokenID: "tok_b", Owner: "bob", Sandbox: "b", SessionID: "ses_3", TurnID: "turn_3", CreatedAt: now.Add(2 * time.Second)},
	}
	for _, j := range jobs {
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatalf("CreateJob %s: %v", j.ID, err)
		}
	}
	if err := s.CreateJob(ctx, jobs[0]); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateJob with a taken id = %v, want ErrConflict", err)
	}
	got, err := s.GetJob(ctx, "job_1")
	if err != nil || !(got.ID == "job_1" && got.TokenID == "tok_j" && got.SandboxCreated && got.SessionID == "ses_1" &&
		got.TurnID == "turn_1" && got.Owner == "ada" && got.Sandbox == "box" && got.CreatedAt.Equal(now)) {
		t.Errorf("GetJob = %+v, %v; want %+v", got, err, jobs[0])
	}
	if _, err := s.GetJob(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetJob(unknown) = %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		token, owner string
		want         []string
	}{{"tok_j", "", []string{"job_1"}}, {"", "ada", []string{"job_1", "job_2"}}, {"", "", []string{"job_1", "job_2", "job_3"}}, {"tok_x", "", nil}} {
		js, err := s.ListJobs(ctx, c.token, c.owner)
		var ids []string
		for _, j := range js {
			ids = append(ids, j.ID)
		}
		if err != nil || fmt.Sprint(ids) != fmt.Sprint(c.want) {
			t.Errorf("ListJobs(%q, %q) = %v, %v; want %v", c.token, c.owner, ids, err, c.want)
		}
	}
}

// appendN appends n events to a turn without moving its read position.
func appendN(t *testing.T, ctx context.Context, s store.Store, session, turn string, n int) []store.Event {
	t.Helper()
	evs := make([]store.Event, n)
	for i := range evs {
		// Later than any test's "now" by more than its retention cut, however fast it runs.
		evs[i] = store.Event{TS: time.Now().Add(time.Minute), Type: "assistant", Data: []byte(`{"type":"assistant"}`)}
	}
	out, err := s.AppendEvents(ctx, store.EventAppend{SessionID: session, TurnID: turn, ReadPos: -1, Events: evs})
	if err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	return out
}

func testEvents(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	mustCreateSession(t, ctx, s, newSession("ses_a", "alpha", "ada"))
	mustCreateTurn(t, ctx, s, newTurn("turn_1", "ses_a", now))
	if err := s.CreateJob(ctx, store.Job{ID: "job_1", TokenID: "tok", Owner: "ada", Sandbox: "box", SessionID: "ses_a", TurnID: "turn_1", CreatedAt: now}); err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	first := []store.Event{
		{TS: now, Type: "system", Data: []byte(`{"type":"system","subtype":"init"}`)},
		{TS: now, Type: "invalid", Data: []byte(`"not json"`), Invalid: true},
		{TS: now.Add(time.Millisecond), Type: "assistant", Data: []byte(`{"type":"assistant","x":"` + "cut"), Truncated: true},
	}
	got, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_a", JobID: "job_1", TurnID: "turn_1", FromPos: 0, ReadPos: 120, Events: first})
	if err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || e.JobSeq != int64(i+1) || e.SessionID != "ses_a" || e.JobID != "job_1" || e.TurnID != "turn_1" {
			t.Errorf("appended event %d = %+v, want seq and job seq %d", i, e, i+1)
		}
	}
	// A watcher that read from a stale position records nothing.
	if _, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_a", TurnID: "turn_1", FromPos: 0, ReadPos: 50, Events: first[:1]}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("AppendEvents from a stale position = %v, want ErrConflict", err)
	}
	if tu, err := s.GetTurn(ctx, "turn_1"); err != nil || tu.ReadPos != 120 {
		t.Errorf("turn read position = %d, %v; want 120", tu.ReadPos, err)
	}
	if _, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "nope", TurnID: "turn_1", ReadPos: -1, Events: first[:1]}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendEvents to no session = %v, want ErrNotFound", err)
	}
	appendN(t, ctx, s, "ses_a", "turn_1", 2) // outside the job: no job seq

	evs, err := s.ListEvents(ctx, "ses_a", 1, 100)
	if err != nil || len(evs) != 4 {
		t.Fatalf("ListEvents(since 1) = %d events, %v; want 4", len(evs), err)
	}
	e := evs[0]
	if e.Seq != 2 || e.Type != "invalid" || string(e.Data) != `"not json"` || !e.Invalid || e.Truncated || !e.TS.Equal(now) {
		t.Errorf("event 2 = %+v", e)
	}
	if e := evs[1]; !e.Truncated || e.Invalid || string(e.Data) != string(first[2].Data) {
		t.Errorf("event 3 = %+v", e)
	}
	if e := evs[3]; e.Seq != 5 || e.JobSeq != 0 || e.JobID != "" {
		t.Errorf("event 5 = %+v, want seq 5 outside the job", e)
	}
	if page, err := s.ListEvents(ctx, "ses_a", 0, 2); err != nil || len(page) != 2 || page[1].Seq != 2 {
		t.Errorf("ListEvents(limit 2) = %+v, %v", page, err)
	}
	jevs, err := s.ListJobEvents(ctx, "job_1", 0, 100)
	if err != nil || len(jevs) != 3 || jevs[2].JobSeq != 3 {
		t.Errorf("ListJobEvents = %+v, %v; want job seqs 1..3", jevs, err)
	}

	// Retention forgets old events; seqs are never reused.
	n, err := s.DeleteEventsBefore(ctx, now.Add(time.Millisecond))
	if err != nil || n != 2 {
		t.Errorf("DeleteEventsBefore = %d, %v; want 2", n, err)
	}
	if evs, err := s.ListEvents(ctx, "ses_a", 0, 100); err != nil || len(evs) != 3 || evs[0].Seq != 3 {
		t.Errorf("ListEvents after retention = %+v, %v; want seqs 3..5", evs, err)
	}
	if more := appendN(t, ctx, s, "ses_a", "turn_1", 1); more[0].Seq != 6 {
		t.Errorf("seq after retention = %d, want 6", more[0].Seq)
	}
	if se, err := s.GetSession(ctx, "", "ses_a"); err != nil || se.LastSeq != 6 {
		t.Errorf("session LastSeq = %d, %v; want 6", se.LastSeq, err)
	}
	// A turn ends with its last event in one step, and only once.
	mustCreateSession(t, ctx, s, newSession("ses_b", "beta", "ada"))
	mustCreateTurn(t, ctx, s, newTurn("turn_2", "ses_b", now))
	finished := []store.Event{{TS: now.Add(time.Minute), Type: "turn.finished", Data: []byte(`{"type":"turn.finished"}`)}}
	end := store.TurnUpdate{ID: "turn_2", State: store.TurnDone, EndedAt: now, StartedAt: now}
	if _, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_b", TurnID: "turn_2", ReadPos: -1, Events: finished, End: &end}); err != nil {
		t.Fatalf("AppendEvents ending the turn: %v", err)
	}
	if tu, err := s.GetTurn(ctx, "turn_2"); err != nil || tu.State != store.TurnDone {
		t.Errorf("turn_2 = %s, %v; want done", tu.State, err)
	}
	end.State = store.TurnFailed
	if _, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_b", TurnID: "turn_2", ReadPos: -1, Events: finished, End: &end}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("AppendEvents ending an ended turn = %v, want ErrConflict", err)
	}
	if tu, err := s.GetTurn(ctx, "turn_2"); err != nil || tu.State != store.TurnDone {
		t.Errorf("turn_2 after a second end = %s, %v; want done", tu.State, err)
	}
	if se, err := s.GetSession(ctx, "", "ses_b"); err != nil || se.LastSeq != 1 {
		t.Fatalf("session LastSeq = %d, %v; want 1: the refused end recorded its event", se.LastSeq, err)
	}
}

// testEventSeqConcurrent appends from many goroutines at once: every seq from 1 to the total
// must be taken exactly once, and each batch's seqs must be consecutive.
func testEventSeqConcurrent(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	mustCreateSession(t, ctx, s, newSession("ses_a", "alpha", "ada"))
	mustCreateTurn(t, ctx, s, newTurn("turn_1", "ses_a", now))
	const writers, batches, size = 8, 10, 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seqs = map[int64]int{}
		errs []error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range batches {
				evs := make([]store.Event, size)
				for i := range evs {
					evs[i] = store.Event{TS: now, Type: "x", Data: []byte(fmt.Sprintf(`{"w":%d}`, w))}
				}
				got, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_a", TurnID: "turn_1", ReadPos: -1, Events: evs})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for i, e := range got {
					seqs[e.Seq]++
					if i > 0 && e.Seq != got[i-1].Seq+1 {
						errs = append(errs, fmt.Errorf("batch seqs %d then %d", got[i-1].Seq, e.Seq))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	total := writers * batches * size
	for seq := int64(1); seq <= int64(total); seq++ {
		if seqs[seq] != 1 {
			t.Errorf("seq %d taken %d times, want once", seq, seqs[seq])
		}
	}
	if len(seqs) != total {
		t.Errorf("%d distinct seqs, want %d", len(seqs), total)
	}
	evs, err := s.ListEvents(ctx, "ses_a", 0, total+1)
	if err != nil || len(evs) != total {
		t.Fatalf("ListEvents = %d events, %v; want %d", len(evs), err, total)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d", i, e.Seq)
		}
	}
}
