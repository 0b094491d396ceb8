// Package runlogtest finds the agents' recorded run logs that tests replay: the shared
// fixtures in ../shared/fixtures/runlogs beside the repository (a worktree's sibling, CI's
// checkout beside the clone). They are not part of the repository, so a clone alone lacks
// them: then every test that needs them skips, saying which path it looked for, and the rest
// of the suite runs.
package runlogtest

import (
	"os"
	"path/filepath"
	"testing"
)

// rel is where the fixtures are, from the repository's root.
const rel = "../shared/fixtures/runlogs"

// Dir returns the fixture run logs' directory, or skips t (loudly, naming the path) when it
// is not there. It is found from the repository's root (the directory of go.mod above the
// test's working directory), so a test of any package finds the same one.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Skipf("SKIPPING: needs the fixture run logs at %s beside the repository, and the repository's root is not found: %v", rel, err)
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "fixtures", "runlogs")
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Skipf("SKIPPING: needs the fixture run logs in %s (%s beside the repository), which is absent: %v", dir, rel, err)
	}
	return dir
}

// Path returns the fixture run log name, or skips t as Dir does. A missing log in a directory
// that is there fails t: the fixtures and the test disagree.
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture run log %s: %v", name, err)
	}
	return p
}

// repoRoot is the nearest directory above the working directory with a go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", os.ErrNotExist
		}
		dir = up
	}
}
