package providertest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Gate makes a FIFO that a shell command in a local sandbox waits on with `read _ < path`, and
// returns open, which lets that command go on, whether it reads already or later. The wait is
// one blocked read, where a loop such as `while [ ! -e flag ]; do sleep 0.01; done` starts a
// sleep process per turn.
func Gate(t *testing.T) (path string, open func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		// Read-write, so the open never waits for a reader; and held open until the test ends:
		// a FIFO's data is lost when its last reader and writer close it.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open the gate: %v", err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.WriteString("go\n"); err != nil {
			t.Fatalf("open the gate: %v", err)
		}
	}
}
