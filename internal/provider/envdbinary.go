package provider

import (
	"fmt"
	"os"
	"path/filepath"
)

// EnvdName is the file name of hangar-envd, the binary providers place in their sandboxes:
// the daemon (`hangar-envd envd`) and the turn harness (`hangar-envd harness`).
const EnvdName = "hangar-envd"

// DefaultEnvdBinary is the hangar-envd a provider uses when its configuration names none:
// the one beside this executable (make build puts both binaries in bin/). When there is
// none, this executable itself, which must then carry the same verbs (hangar does, for
// development: `hangar envd`, `hangar harness`); fallback says so, for a warning, since a
// sandbox then runs the whole control plane's binary.
func DefaultEnvdBinary() (path string, fallback bool, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", false, fmt.Errorf("find this executable: %w", err)
	}
	path, fallback = envdBeside(exe)
	return path, fallback, nil
}

// envdBeside is DefaultEnvdBinary for the executable exe.
func envdBeside(exe string) (path string, fallback bool) {
	beside := filepath.Join(filepath.Dir(exe), EnvdName)
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
		return beside, false
	}
	return exe, filepath.Base(exe) != EnvdName
}
