package watch

import (
	"context"
	"errors"
	"testing"

	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/stream/streamtest"
)

// TestLimitAcrossReplicas: a token's watches on other replicas count against MaxPerToken, and
// a watch closed here gives its count back.
func TestLimitAcrossReplicas(t *testing.T) {
	shared := streamtest.NewCounts(map[string]int{"watch " + ada.TokenID: 1}) // one on another replica
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
	if got := shared.Of("watch " + ada.TokenID); got != 1 {
		t.Errorf("after Close the shared count is %d, want 1 (the other replica's)", got)
	}
}
