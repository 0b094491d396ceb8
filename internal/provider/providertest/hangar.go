package providertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/provider"
)

// build builds ./cmd/<name> of each name into dir/<name>, static (CGO_ENABLED=0) so that
// hangar-envd runs in any Linux image, side by side (where `hangar serve` finds its
// hangar-envd), with one go build (each go command costs a load of the module's packages), and
// returns the first one's path.
func build(dir string, names ...string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", names[0], err)
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", strings.Join(names, ", "), err, b)
	}
	return filepath.Join(dir, names[0]), nil
}

// module is the path in hangar's go.mod.
const module = "github.com/hangar-dev/hangar"

// moduleRoot is the folder of hangar's go.mod, found by walking up from the test's working
// directory (a test runs in its package's folder), as the go command finds it, without
// starting one.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find go.mod: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if modulePath(b) != module {
				return "", fmt.Errorf("find go.mod: %s is not hangar's module", filepath.Join(dir, "go.mod"))
			}
			return dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("find go.mod: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find go.mod: not inside hangar's module")
		}
		dir = parent
	}
}

// modulePath is the module path a go.mod declares, "" if it declares none.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
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

// BinEnv names a folder where hangar and hangar-envd are already built for this checkout:
// `make test` builds them into bin/ first and sets it, and the tests run those rather than each
// package asking go build (about 2 CPU-seconds a package, to find them up to date).
const BinEnv = "HANGAR_TEST_BIN"

// SharedHangar builds hangar and hangar-envd into the checkout's shared folder and returns hangar's path; with BinEnv set, it returns the one built there.
func SharedHangar() (string, error) { return shared("hangar", provider.EnvdName) }

// SharedEnvd builds hangar-envd into the checkout's shared folder and returns its path: the
// binary sandboxes run (the daemon, the turn harness); with BinEnv set, the one built there.
func SharedEnvd() (string, error) { return shared(provider.EnvdName) }

func shared(names ...string) (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("%s=%s: %w (make test builds hangar there first)", BinEnv, dir, err)
			}
		}
		return filepath.Join(dir, names[0]), nil
	}
	dir, err := sharedDir()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", names[0], err)
	}
	return build(dir, names...)
}

// MainWithEnvd is a TestMain for packages whose tests run hangar-envd (as sandboxes' daemon or
// turn harness): it builds it (SharedEnvd), sets *bin, runs the tests, checks for leaked
// goroutines (goleak) and returns the exit code for os.Exit.
func MainWithEnvd(m Runner, bin *string) int { return mainWith(m, bin, SharedEnvd) }

// MainWithHangar is MainWithEnvd for packages whose tests run hangar itself (hangar serve, the
// CLI): *bin is hangar's path, hangar-envd beside it (SharedHangar).
func MainWithHangar(m Runner, bin *string) int { return mainWith(m, bin, SharedHangar) }

// Runner runs a package's tests: a *testing.M, or one wrapped to free what its tests share
// once they have run (before the goroutine-leak check).
type Runner interface{ Run() int }

func mainWith(m Runner, bin *string, build func() (string, error)) int {
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
