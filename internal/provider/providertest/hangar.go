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
)

// BuildHangar builds the hangar binary (./cmd/hangar), static (CGO_ENABLED=0) so it runs in any
// Linux image, into dir and returns its path. Call it once, from TestMain.
func BuildHangar(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build hangar: %w", err)
	}
	out := filepath.Join(dir, "hangar")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/hangar")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hangar: %w: %s", err, b)
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

// SharedHangar builds the hangar binary, as BuildHangar does, into a folder of the system's
// temporary directory that belongs to this checkout of the module (named by a hash of its path),
// and returns its path. The folder is kept: the next build finds the binary up to date (go build
// relinks only when a source changed), which saves a link of the whole binary per test package.
// Concurrent builds of one checkout are safe: go build renames the new binary into place.
func SharedHangar() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build hangar: %w", err)
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "hangar-test-bin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("build hangar: %w", err)
	}
	return BuildHangar(dir)
}

// MainWithHangar is a TestMain for packages whose tests run the hangar binary: it builds it
// (SharedHangar), sets *bin, runs the tests, checks for leaked goroutines (goleak) and returns
// the exit code for os.Exit.
func MainWithHangar(m *testing.M, bin *string) int {
	var err error
	if *bin, err = SharedHangar(); err != nil {
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
