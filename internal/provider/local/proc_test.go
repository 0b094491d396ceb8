package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"

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

// sleeper starts `sleep 600` in a session of its own, in dir, with the test's environment, and
// returns it; it is killed and reaped when the test ends.
func sleeper(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "600")
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c
}

// TestWaitDeadOnExit: waitDead returns as the process exits, with no tick of the clock (it waits
// on a pidfd, not by polling /proc), and gives up when the timeout passes.
func TestWaitDeadOnExit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, exits := range []bool{true, false} {
		clock := quartz.NewMock(t)
		trap := clock.Trap().NewTimer("local", "dead", "timeout")
		c := sleeper(t, "/")
		st, err := procStat(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		d := &daemonRecord{PID: c.Process.Pid, StartTime: st.startTime}
		dead := make(chan bool)
		go func() { dead <- waitDead(ctx, clock, d, time.Minute) }()
		trap.MustWait(ctx).MustRelease(ctx)
		trap.Close()
		if exits {
			c.Process.Kill()
		} else {
			clock.Advance(time.Minute).MustWait(ctx)
		}
		select {
		case got := <-dead:
			if got != exits {
				t.Errorf("waitDead (the process exits: %v) = %v", exits, got)
			}
		case <-ctx.Done():
			t.Fatalf("waitDead (the process exits: %v) did not return", exits)
		}
	}
}

// TestKillInsideSession: killInside kills a process of the daemon's session that left the
// folder and carries no marker, and only while it is given that session.
func TestKillInsideSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	c := sleeper(t, "/")
	pid := c.Process.Pid
	killInside(ctx, quartz.NewReal(), dir, 0)
	if st, err := procStat(pid); err != nil || st.gone() {
		t.Fatalf("a process outside the folder, of no session given, was killed: %v %c", err, st.state)
	}
	killInside(ctx, quartz.NewReal(), dir, pid)
	if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the session's process ended with %v, want killed", err)
	}
}

// TestParseStat: the fields come after the last ')', whatever the command name holds.
func TestParseStat(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]stat{
		"42 (sleep) S 1 42 42 0 -1 4194560 99 0 0 0 0 0 0 0 20 0 1 0 123456 2433024 130 18446744073709551615\n": {state: 'S', startTime: 123456},
		"7 (a) b) (c) Z 1 7 7 34817 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 0\n":                                   {state: 'Z', tty: 34817, startTime: 99},
	} {
		if got, err := parseStat([]byte(line)); err != nil || got != want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "42 sleep S 1", "42 (sleep) S 1 42 42 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}
