package cli

import (
	"encoding/json"
	"testing"

	"github.com/hangar-dev/hangar/internal/wire"
)

// TestFinishedReadsWire: a turn.finished as hangar records it (wire.TurnFinished) reads as one
// line with its status, exit code, the cost from its summary and its reason, less what the line
// said already.
func TestFinishedReadsWire(t *testing.T) {
	t.Parallel()
	code := 1
	data, err := json.Marshal(wire.TurnFinished{Type: "turn.finished", Turn: "t1", Status: "failed", ExitCode: &code,
		Summary: json.RawMessage(`{"lines":3,"cost_usd":0.125}`), Reason: "exit code 1: tests failed"})
	if err != nil {
		t.Fatal(err)
	}
	got := (&eventPrinter{}).lines(wire.Event{Type: "turn.finished", Data: data})
	want := "── turn failed, exit 1, cost $0.1250: tests failed"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
