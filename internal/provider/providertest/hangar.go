package providertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
