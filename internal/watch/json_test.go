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

// TestGapJSON: a Gap marshalled as it is reads as the wire.Gap clients see.
func TestGapJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Gap{From: 1, To: 2})
	if err != nil || string(b) != `{"from":1,"to":2}` {
		t.Errorf("Gap = %s, %v; want {\"from\":1,\"to\":2}", b, err)
	}
}
