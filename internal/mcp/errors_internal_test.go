package mcp

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sandbox"
)

// TestClassifyDiedSandbox: a daemon or container that died under a tool call is the sandbox's
// failure, said in a sentence that names the part, never "Something went wrong inside hangar".
func TestClassifyDiedSandbox(t *testing.T) {
	t.Parallel()
	for _, part := range []string{sandbox.PartDaemon, sandbox.PartSandbox} {
		died := &sandbox.DiedError{Sandbox: "box", Part: part, State: "failed", Reason: "the container is exited (exit code 137)"}
		err := classify(slog.New(slog.NewTextHandler(io.Discard, nil)), "exec", fmt.Errorf("exec: %w", died))
		msg := err.Error()
		if !strings.Contains(msg, "box") || !strings.Contains(msg, "now failed: the container is exited") || strings.Contains(msg, "inside hangar") {
			t.Errorf("part %s: tool error = %q", part, msg)
		}
		if part == sandbox.PartDaemon && !strings.Contains(msg, "daemon of sandbox box") {
			t.Errorf("a dead daemon is not named: %q", msg)
		}
	}
}
