package turns

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/turns/runlog"
)

// runlog keeps agents' lines from posing as hangar's turn.finished by its own spelling of it.
func TestRunlogReservesTurnFinished(t *testing.T) {
	t.Parallel()
	if runlog.TypeTurnFinished != TypeTurnFinished {
		t.Fatalf("runlog.TypeTurnFinished = %q, turns.TypeTurnFinished = %q: they must agree", runlog.TypeTurnFinished, TypeTurnFinished)
	}
}
