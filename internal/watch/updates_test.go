package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/internal/stream"
)

// TestUpdates: a watch's updates stream says nothing of the changes before it was opened,
// tells the newest change's seq (without the change) once one happens, and ends with the
// sandbox.
func TestUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w, err := e.s.Open(ctx, ada, "box", e.dir, false) // holds the daemon's watch, to see "a"
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Mkdir(filepath.Join(e.dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitEvents(ctx, t, w, 0, 1)
	st, err := e.s.Updates(ctx, ada, "box", e.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := os.Mkdir(filepath.Join(e.dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	items, err := st.Next(ctx, 0)
	if err != nil || len(items) != 1 || items[0].ID != "2" || len(items[0].Data) != 0 {
		t.Fatalf("update = %+v, %v; want one item, seq 2", items, err)
	}
	e.streams.EndSandbox("box", stream.ReasonDestroyed)
	var ended *stream.Ended
	for err == nil {
		_, err = st.Next(ctx, 0)
	}
	if !errors.As(err, &ended) || ended.Reason != stream.ReasonDestroyed {
		t.Errorf("the stream ended with %v, want destroyed", err)
	}
}
