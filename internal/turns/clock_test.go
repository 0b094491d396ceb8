package turns

import (
	"context"
	"testing"
	"time"
)

// TestStampsAreTheClocks: a session's, a turn's and its events' times are the Service's clock,
// not the wall clock (here a mock set to 2999, which no wall clock reads).
func TestStampsAreTheClocks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.clock.Set(time.Date(2999, 1, 2, 3, 4, 5, 0, time.UTC)).MustWait(ctx)
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := s.StartTurn(ctx, ada, "s1", `echo '{"type":"assistant"}'`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	evs, err := f.st.ListEvents(ctx, se.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stamps := map[string]time.Time{"session created": se.CreatedAt, "turn created": tu.CreatedAt, "turn started": end.StartedAt, "turn ended": end.EndedAt}
	for _, e := range evs {
		stamps["event "+e.Type] = e.TS
	}
	if len(evs) < 3 {
		t.Errorf("%d events, want turn.started, the line and turn.finished", len(evs))
	}
	for what, at := range stamps {
		if at.Year() != 2999 {
			t.Errorf("%s at %s, want the clock's time (2999)", what, at)
		}
	}
}
