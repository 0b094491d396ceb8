// Package deploy_test checks what deploy/ ships: the Helm chart (rendered with helm over several
// value sets), the Grafana dashboard and the Prometheus alert rules, against the metrics hangar
// registers.
package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// repoRoot is the repository's top directory (this package is deploy/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tool finds a tool built by scripts/tools in .cache/tools (or named by env), and skips the
// test loudly when it is not there: `make chart-check` and .ci/run build it first. In CI (CI
// set) a missing tool fails the test: CI must never skip these checks.
func tool(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p := filepath.Join(repoRoot(t), ".cache", "tools", name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not built (%v): .ci/run runs scripts/tools before make test", name, err)
		}
		t.Skipf("SKIPPED: %s is not built (%v): run scripts/tools (CI does, before make test), or set %s", name, err, env)
	}
	return p
}
