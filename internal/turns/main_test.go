package turns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the hangar binary the service tests run as the harness, built once.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

// runlogDir is the shared fixture logs' directory: ../shared beside the repository (in a
// worktree, /work/wt/shared; in CI, the clone's sibling). Absent, the tests that need it fail
// in CI and skip loudly elsewhere.
func runlogDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "fixtures", "runlogs"))
	if err != nil {
		t.Fatalf("fixture dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture logs missing at %s: CI must check out ../shared beside the repository", dir)
		}
		t.Skipf("SKIPPING: fixture logs not found at %s (%v)", dir, err)
	}
	return dir
}
