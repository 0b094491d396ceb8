package harness

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/turns"
)

// The harness spells the prompt placeholder itself (it must not import turns, which would
// put the control plane into hangar-envd); it must be the one turns puts in agents' argv.
func TestPromptArgIsTurns(t *testing.T) {
	t.Parallel()
	if PromptArg != turns.PromptArg {
		t.Fatalf("harness.PromptArg = %q, turns.PromptArg = %q: they must agree", PromptArg, turns.PromptArg)
	}
}
