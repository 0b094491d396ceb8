package replicas

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// TestStreamLimitsAcrossReplicas: two replicas' stream registries on one PostgreSQL hold one
// user's streams, through many tokens, to HANGAR_STREAM_MAX_PER_USER together, and one OAuth
// grant's streams, through its refreshed tokens, to HANGAR_STREAM_MAX_PER_TOKEN together;
// another user is not held back; a stream closed on one replica makes room on the other.
func TestStreamLimitsAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, a, b, _, _, _ := newPair(t)
	ctx := context.Background()
	cfg := stream.Config{MaxPerToken: 2, MaxPerUser: 4, MaxTotal: 100}
	ra, rb := stream.New(withShared(cfg, a)), stream.New(withShared(cfg, b))
	open := func(r *stream.Registry, p auth.Principal) (*stream.Stream, error) {
		s, err := r.Open(ctx, stream.Options{Kind: stream.KindEvents, Principal: p})
		if err == nil {
			t.Cleanup(s.Close)
		}
		return s, err
	}
	mallory := func(i int) auth.Principal { return auth.Principal{TokenID: fmt.Sprintf("tok_m%d", i), User: "mallory"} }
	var first *stream.Stream
	for i := range 4 {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		s, err := open(r, mallory(i))
		if err != nil {
			t.Fatalf("mallory's stream %d: %v", i, err)
		}
		if i == 0 {
			first = s
		}
	}
	var le *stream.LimitError
	for name, r := range map[string]*stream.Registry{"a": ra, "b": rb} {
		if _, err := open(r, mallory(9)); !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_USER" {
			t.Errorf("mallory's fifth stream on replica %s: %v, want the per-user limit", name, err)
		}
	}
	if _, err := open(rb, auth.Principal{TokenID: "tok_ada", User: "ada"}); err != nil {
		t.Errorf("another user's stream: %v", err)
	}
	first.Close()
	if _, err := open(rb, mallory(9)); err != nil {
		t.Errorf("mallory's stream after one closed on the other replica: %v", err)
	}

	refreshed := func(i int) auth.Principal {
		return auth.Principal{TokenID: fmt.Sprintf("tok_g%d", i), User: "ada", Grant: "gr_1"}
	}
	if _, err := open(ra, refreshed(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := open(rb, refreshed(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := open(ra, refreshed(3)); !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_TOKEN" {
		t.Errorf("a grant's third stream, through its third token: %v, want the per-token limit", err)
	}
}

func withShared(cfg stream.Config, c *Cluster) stream.Config {
	cfg.Shared = c
	return cfg
}
