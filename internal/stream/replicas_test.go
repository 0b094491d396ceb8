package stream

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream/streamtest"
)

// TestSharedPerTokenLimit: a token's streams on other replicas count against MaxPerToken; a
// refused stream counts nowhere; a closed one gives its count back; hangar's own streams are
// not counted there.
func TestSharedPerTokenLimit(t *testing.T) {
	shared := streamtest.NewCounts(map[string]int{"t1": 1}) // one open on another replica
	r, _ := newRegistry(t, Config{MaxPerToken: 2, Shared: shared})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("t1")})
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("t1")}); !errors.As(err, &le) {
		t.Fatalf("a stream past the limit counted across replicas: %v, want a LimitError", err)
	}
	if total, tok := r.Count("t1"); total != 1 || tok != 1 {
		t.Errorf("after the refusal: %d open, %d of the token; want 1, 1", total, tok)
	}
	own, err := r.Open(context.Background(), Options{Kind: KindFollower, Principal: principal("t1"), Own: true})
	if err != nil {
		t.Fatalf("hangar's own stream on the token's behalf: %v", err)
	}
	own.Close()
	s.Close()
	if got := shared.Of("t1"); got != 1 {
		t.Errorf("after Close the shared count is %d, want 1 (the other replica's)", got)
	}
}

// TestSharedPerUserAndGrantLimits: a user's streams on other replicas count against
// MaxPerUser, a grant's against MaxPerToken; a refusal for the user's limit gives back the
// token's count it took; Close gives both back.
func TestSharedPerUserAndGrantLimits(t *testing.T) {
	shared := streamtest.NewCounts(map[string]int{"user ada": 2, "grant gr_1": 1})
	r, _ := newRegistry(t, Config{MaxPerToken: 2, MaxPerUser: 3, Shared: shared})
	ada := func(tok, grant string) Options {
		return Options{Kind: KindExec, Principal: auth.Principal{TokenID: tok, User: "ada", Grant: grant}}
	}
	s, err := r.Open(context.Background(), ada("t1", "gr_1"))
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := r.Open(context.Background(), ada("t2", "")); !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_USER" {
		t.Fatalf("a stream past the user's limit counted across replicas: %v, want the per-user limit", err)
	}
	if got := shared.Of("t2"); got != 0 {
		t.Errorf("the refused stream's token still counts %d across replicas", got)
	}
	s.Close()
	if _, err := r.Open(context.Background(), ada("t3", "gr_1")); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := r.Open(context.Background(), ada("t4", "gr_1")); !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_TOKEN" {
		t.Fatalf("a stream past the grant's limit counted across replicas: %v, want the per-token limit", err)
	}
}

// TestAnnounceAndEndedElsewhere: EndSandbox and EndToken are announced to the other replicas;
// what they announce ends the streams here without being announced again.
func TestAnnounceAndEndedElsewhere(t *testing.T) {
	var mu sync.Mutex
	var heard []Ending
	r, _ := newRegistry(t, Config{Announce: func(e Ending) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, e)
	}})
	open := func(o Options) *Stream {
		s, err := r.Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	inBox := open(Options{Kind: KindWatch, Principal: principal("t1"), Sandbox: "box"})
	ofT2 := open(Options{Kind: KindEvents, Principal: principal("t2")})
	other := open(Options{Kind: KindEvents, Principal: principal("t3")})

	r.EndedElsewhere(Ending{Sandbox: "box", Reason: ReasonDestroyed})
	r.EndedElsewhere(Ending{Token: "t2"})
	<-inBox.Done()
	<-ofT2.Done()
	if inBox.Reason() != ReasonDestroyed || ofT2.Reason() != ReasonRevoked {
		t.Errorf("ended with %s and %s, want destroyed and revoked", inBox.Reason(), ofT2.Reason())
	}
	select {
	case <-other.Done():
		t.Error("a stream of neither ended")
	default:
	}
	mu.Lock()
	if len(heard) != 0 {
		t.Errorf("what another replica ended was announced again: %v", heard)
	}
	mu.Unlock()

	r.EndSandbox("box2", ReasonPaused)
	r.EndToken("t3")
	mu.Lock()
	defer mu.Unlock()
	want := []Ending{{Sandbox: "box2", Reason: ReasonPaused}, {Token: "t3"}}
	if len(heard) != 2 || heard[0] != want[0] || heard[1] != want[1] {
		t.Errorf("announced %v, want %v", heard, want)
	}
}
