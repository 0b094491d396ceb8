package hostile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// The attacks whose outcome would depend on the machine the suite runs on check what they need
// first, and say what is missing rather than record a cell that flips from one machine to the
// next. These tests run their scripts here, with sh, on a PATH made for the case.

// sh runs script with /bin/sh on path (PATH), in dir, and returns its stdout and stderr, as a
// batch does.
func sh(t *testing.T, script, path string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	return string(out)
}

// binDir is a folder of links to the named tools of this machine's PATH, for a PATH without the
// others.
func binDir(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("this test needs %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReachWithoutWget: where the sandbox has no wget, reach-hangar did not run; it is not
// hangar's port refused.
func TestReachWithoutWget(t *testing.T) {
	t.Parallel()
	r := &run{t: t, serve: &providertest.Serve{Addr: "127.0.0.1:9"}}
	out := sh(t, r.reachAttack(), binDir(t, "grep", "head"))
	saw, contained, err := judgeReach(out)
	if contained || err == nil || saw != noWget {
		t.Fatalf("without wget the attack printed %q, judged %q (contained %v, error %v); want %q, not contained, and an error saying why", out, saw, contained, err, noWget)
	}
	if !strings.Contains(err.Error(), "busybox") {
		t.Errorf("the error does not say what to install: %v", err)
	}
}

// TestDiskFillWithoutRoom: with less room than the disk fill wants where it writes, it writes
// nothing and fails saying how much is free, rather than record a short write as a bound.
func TestDiskFillWithoutRoom(t *testing.T) {
	t.Parallel()
	bin := binDir(t, "awk", "dd", "wc", "rm")
	df := "#!/bin/sh\nprintf 'Filesystem 1024-blocks Used Available Capacity Mounted on\\nfull 1048576 946176 102400 91%% /\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "df"), []byte(df), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, work: t.TempDir()}
	out := sh(t, r.diskAttack(), bin)
	saw, contained, err := judgeDisk(r.work, out)
	if err == nil || contained || !strings.HasPrefix(saw, "not run") {
		t.Fatalf("with 100 MiB free the disk fill printed %q, judged %q (contained %v, error %v); want it not run, and an error saying why", out, saw, contained, err)
	}
	if !strings.Contains(err.Error(), "100 MiB free") {
		t.Errorf("the error does not say what is free: %v", err)
	}
	if left, _ := os.ReadDir(r.work); len(left) != 0 {
		t.Errorf("the disk fill wrote %v without room for it", left)
	}
}

// TestForkBombSharedCgroup: a local sandbox is in hangar's own cgroups (here, the test's): the
// fork bomb says so and forks nothing, whatever this machine's pids limit is.
func TestForkBombSharedCgroup(t *testing.T) {
	t.Parallel()
	r := &run{t: t, work: t.TempDir(), col: column{provider: "local"}}
	out := sh(t, r.forkAttack(), os.Getenv("PATH"))
	saw, contained := r.judgeFork("sandbox user", out)
	if contained || !strings.Contains(saw, "hangar's own cgroup") {
		t.Fatalf("in the test's own cgroups the fork bomb printed %q, judged %q (contained %v); want it not run there, and not contained", out, saw, contained)
	}
}
