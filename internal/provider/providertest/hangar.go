package providertest

import (
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

// MainWithHangar is a TestMain for packages whose tests run the hangar binary: it builds it
// into a temporary folder, sets *bin, runs the tests, checks for leaked goroutines (goleak),
// removes the folder and returns the exit code for os.Exit.
func MainWithHangar(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "hangar-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildHangar(dir); err != nil {
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
