package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestArgInside: a process that Destroy cannot look into (not dumpable, as a turn's harness is:
// its cwd and environ are hidden from a control plane without CAP_SYS_PTRACE) is found by an
// argument of its command line inside the sandbox's folder, and only so.
func TestArgInside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func(arg string) int {
		// sh keeps arg as its $0 while it waits for sleep; with no terminal (a test's).
		c := exec.Command("sh", "-c", "sleep 600; :", arg)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Process.Kill()
			c.Wait()
		})
		// Start returns once the exec began: wait until the kernel shows sh's own command line.
		pid := c.Process.Pid
		providertest.WaitFor(t, 30*time.Second, time.Millisecond, "sh's command line", func() bool {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return strings.Contains(string(b), arg)
		})
		return pid
	}
	if pid := start(filepath.Join(dir, "turns", "turn_x")); !argInside(pid, dir) {
		t.Errorf("a process with an argument inside %s was not found", dir)
	}
	if pid := start(dir + "-other/turns"); argInside(pid, dir) {
		t.Errorf("a process whose argument only starts like %s was taken for the sandbox's", dir)
	}
}
