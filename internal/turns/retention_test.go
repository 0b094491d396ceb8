package turns

import (
	"context"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/store"
)

// TestRetention: events older than the retention go at the next hourly prune; newer ones stay.
func TestRetention(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	clk := quartz.NewMock(t)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk.Set(start).MustWait(ctx)
	f.cfg.Clock, f.cfg.EventRetention = clk, 24*time.Hour
	s := New(f.cfg)
	defer s.Close()
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.CreateTurn(ctx, store.Turn{ID: "turn_1", SessionID: se.ID, Prompt: "x", State: store.TurnQueued, CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	old, fresh := start.Add(-25*time.Hour), start.Add(-23*time.Hour-30*time.Minute)
	if _, err := f.st.AppendEvents(ctx, store.EventAppend{SessionID: se.ID, TurnID: "turn_1", ReadPos: -1, Events: []store.Event{
		{TS: old, Type: "a", Data: []byte(`{}`)}, {TS: fresh, Type: "b", Data: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	trap := clk.Trap().NewTicker("turns", "retention")
	defer trap.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.RunRetention(rctx); close(done) }()
	defer func() { stop(); <-done }()
	trap.MustWait(ctx).MustRelease(ctx)
	waitFor(t, ctx, "the first prune", func() bool {
		evs, _ := f.st.ListEvents(ctx, se.ID, 0, 10)
		return len(evs) == 1 && evs[0].Type == "b"
	})
	clk.Advance(time.Hour).MustWait(ctx) // "fresh" is now 24.5 h old: it goes at this prune
	waitFor(t, ctx, "the second prune", func() bool {
		evs, _ := f.st.ListEvents(ctx, se.ID, 0, 10)
		return len(evs) == 0
	})
}
