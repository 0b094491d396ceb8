package turns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// hangarBin is the hangar binary the service tests run as the harness, built once.
var hangarBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "turns-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hangarBin = filepath.Join(dir, "hangar")
	if out, err := exec.Command("go", "build", "-o", hangarBin, "../../cmd/hangar").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build hangar: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

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
