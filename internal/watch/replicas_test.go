package watch

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/stream"
)

// counts is a fake of the replicas' shared counts: open holds what other replicas hold too.
type counts struct {
	mu   sync.Mutex
	open map[string]int
}

func (c *counts) Take(_ context.Context, key string, max int) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[key] >= max {
		return false, nil
	}
	c.open[key]++
	return true, nil
}

func (c *counts) Give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[key]--
}

// TestLimitAcrossReplicas: a token's watches on other replicas count against MaxPerToken, and
// a watch closed here gives its count back.
func TestLimitAcrossReplicas(t *testing.T) {
	shared := &counts{open: map[string]int{"watch " + ada.TokenID: 1}} // one on another replica
	e := newEnv(t, Config{MaxPerToken: 2, Shared: shared})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w, err := e.s.Open(ctx, ada, "box", e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	var le *stream.LimitError
	if _, err := e.s.Open(ctx, ada, "box", e.dir, true); !errors.As(err, &le) {
		t.Errorf("a watch past the limit counted across replicas: %v, want a LimitError", err)
	}
	w.Close()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if got := shared.open["watch "+ada.TokenID]; got != 1 {
		t.Errorf("after Close the shared count is %d, want 1 (the other replica's)", got)
	}
}
