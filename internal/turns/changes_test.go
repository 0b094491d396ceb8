package turns

import (
	"context"
	"errors"
	"testing"

	"github.com/hangar-dev/hangar/internal/stream"
)

// TestSessionUpdates: a session's updates stream is refused to whoever may not see the
// session, carries nothing of what came before it was opened, tells its newest seq once an
// event is recorded, and ends with the Service (shutdown).
func TestSessionUpdates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.follow()
	s := New(f.cfg)
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionUpdates(ctx, bob, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's updates of ada's session: %v, want ErrNotFound", err)
	}
	st, err := s.SessionUpdates(ctx, ada, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tu, err := s.StartTurn(ctx, ada, "s1", "true")
	if err != nil {
		t.Fatal(err)
	}
	items, err := st.Next(ctx, 0)
	if err != nil || len(items) != 1 || items[0].ID == "" || items[0].ID == "0" || len(items[0].Data) != 0 {
		t.Fatalf("first update = %+v, %v; want one item, the newest seq", items, err)
	}
	s.Close()
	closed = true
	var ended *stream.Ended
	for err == nil {
		_, err = st.Next(ctx, 0)
	}
	if !errors.As(err, &ended) || ended.Reason != stream.ReasonShutdown {
		t.Errorf("after Close: %v, want the stream ended (shutdown)", err)
	}
	// The turn's harness outlives the service: a service of its own sees it to its end, so
	// that nothing writes in the run root once the test's cleanup removes it.
	s2 := f.service(t)
	if err := s2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitTurn(t, ctx, f.st, tu.ID)
}
