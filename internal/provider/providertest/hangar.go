package providertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/provider"
)

// BuildHangar builds hangar (./cmd/hangar) and hangar-envd (./cmd/hangar-envd), static
// (CGO_ENABLED=0) so that hangar-envd runs in any Linux image, side by side into dir, where
// `hangar serve` finds its hangar-envd; it returns hangar's path. Call it once, from TestMain.
func BuildHangar(dir string) (string, error) {
	if _, err := BuildEnvd(dir); err != nil {
		return "", err
	}
	return build(dir, "hangar")
}

// BuildEnvd builds hangar-envd (./cmd/hangar-envd), static, into dir and returns its path.
func BuildEnvd(dir string) (string, error) { return build(dir, provider.EnvdName) }

// build builds ./cmd/<name> into dir/<name>.
func build(dir, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", name, err, b)
	}
	return out, nil
}

// moduleRoot is the folder of hangar's go.mod, found from the test's working directory.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find go.mod: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("find go.mod: not inside hangar's module")
	}
	return filepath.Dir(gomod), nil
}

// sharedDir is a folder of the system's temporary directory that belongs to this checkout of
// the module (named by a hash of its path). It is kept: the next build finds the binaries up
// to date (go build relinks only when a source changed), which saves a link per test package.
// Concurrent builds of one checkout are safe: go build renames a new binary into place.
func sharedDir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "hangar-test-bin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// SharedHangar builds hangar and hangar-envd, as BuildHangar does, into the checkout's shared
// folder and returns hangar's path.
func SharedHangar() (string, error) {
	dir, err := sharedDir()
	if err != nil {
		return "", fmt.Errorf("build hangar: %w", err)
	}
	return BuildHangar(dir)
}

// SharedEnvd builds hangar-envd into the checkout's shared folder and returns its path: the
// binary sandboxes run (the daemon, the turn harness).
func SharedEnvd() (string, error) {
	dir, err := sharedDir()
	if err != nil {
		return "", fmt.Errorf("build hangar-envd: %w", err)
	}
	return BuildEnvd(dir)
}

// MainWithEnvd is a TestMain for packages whose tests run hangar-envd (as sandboxes' daemon or
// turn harness): it builds it (SharedEnvd), sets *bin, runs the tests, checks for leaked
// goroutines (goleak) and returns the exit code for os.Exit.
func MainWithEnvd(m *testing.M, bin *string) int { return mainWith(m, bin, SharedEnvd) }

// MainWithHangar is MainWithEnvd for packages whose tests run hangar itself (hangar serve, the
// CLI): *bin is hangar's path, hangar-envd beside it (SharedHangar).
func MainWithHangar(m *testing.M, bin *string) int { return mainWith(m, bin, SharedHangar) }

func mainWith(m *testing.M, bin *string, build func() (string, error)) int {
	var err error
	if *bin, err = build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
