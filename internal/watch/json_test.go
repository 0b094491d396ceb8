package watch

import (
	"encoding/json"
	"testing"
	"time"
)

// TestEventJSON pins the bytes a client sees of a watch's change: {seq, ts, name, type}, ts in
// UTC with exactly milliseconds.
func TestEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.FixedZone("CET", 3600))
	b, err := json.Marshal(Event{Seq: 2, TS: at, Name: "dir/one", Type: "remove"})
	want := `{"seq":2,"ts":"2026-01-02T02:04:05.100Z","name":"dir/one","type":"remove"}`
	if err != nil || string(b) != want {
		t.Errorf("got %s (%v), want %s", b, err, want)
	}
}
