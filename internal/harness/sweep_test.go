package harness

import (
	"bytes"
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
)

// TestUIDSweep: a split turn's sweep in a container ends a process of the agent's uid that is
// no descendant of its harness (one it had the daemon start), and spares one of the same uid
// under another turn's harness.
func TestUIDSweep(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: the split test must run")
		}
		t.Skip("SKIPPING: the uid sweep test needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A uid no one else on the machine has: the sweep takes every process of it.
	const uid = 61733
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	stray, spared := "hangar-stray-"+stamp, "hangar-spared-"+stamp
	t.Cleanup(func() {
		for _, pid := range pidsOf(spared) {
			if p, ok := readProcs()[pid]; ok {
				syscall.Kill(p.ppid, syscall.SIGKILL) // the other harness
			}
		}
		for _, m := range []string{stray, spared} {
			for _, pid := range pidsOf(m) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	asUID := []string{"setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--clear-groups"}
	// The stray: orphaned at once (setsid -f), so no descendant of this process.
	if err := exec.CommandContext(ctx, asUID[0], append(asUID[1:], "setsid", "-f", "bash", "-c", "exec -a "+stray+" sleep 600")...).Run(); err != nil {
		t.Fatal(err)
	}
	// Another turn's harness, root, whose agent has the same uid.
	dir := t.TempDir()
	script := strings.Join(asUID, " ") + " bash -c 'exec -a " + spared + " sleep 600' & wait\n"
	os.WriteFile(filepath.Join(dir, "harness"), []byte(script), 0o755)
	// argv[1] "harness", as a turn's harness has; no descendant of this process either.
	other := exec.CommandContext(ctx, "setsid", "-f", "bash", "harness")
	other.Dir = dir
	if err := other.Run(); err != nil {
		t.Fatal(err)
	}
	for len(pidsOf(stray)) == 0 || len(pidsOf(spared)) == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("the uid's processes did not start: stray %v, spared %v", pidsOf(stray), pidsOf(spared))
		case <-time.After(10 * time.Millisecond):
		}
	}
	// No harness pid (none is -1): this test process's own children, other tests' included,
	// are no descendants of the sweep's; only the uid part sweeps.
	sweeper{self: -1, agent: -1, uids: true, uid: uid, clock: quartz.NewReal(), grace: KillGrace}.end()
	if p := pidsOf(stray); len(p) > 0 {
		t.Errorf("the agent's uid's stray process %v survived the sweep", p)
	}
	if len(pidsOf(spared)) == 0 {
		t.Error("the sweep ended another turn's agent")
	}
}

// pidsOf lists the live processes whose argv[0] is marker.
func pidsOf(marker string) []int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(b, []byte(marker+"\x00")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestSweepKillsAfterGrace: a process that ignores SIGTERM is left its grace on the sweep's
// clock (a mock here, moved a sweepPoll at a time), then killed.
func TestSweepKillsAfterGrace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: the split test must run")
		}
		t.Skip("SKIPPING: the uid sweep test needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const uid = 61734 // a uid no one else on the machine has, nor TestUIDSweep
	stray := "hangar-deaf-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		for _, pid := range pidsOf(stray) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// SIGTERM ignored, which exec keeps.
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--clear-groups",
		"setsid", "-f", "bash", "-c", "trap '' TERM; exec -a "+stray+" sleep 600")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for len(pidsOf(stray)) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the stray did not start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	const grace = 5 * sweepPoll
	clock := quartz.NewMock(t)
	polls := clock.Trap().NewTimer("harness", "sweep")
	defer polls.Close()
	swept := make(chan struct{})
	go func() {
		sweeper{self: -1, agent: -1, uids: true, uid: uid, clock: clock, grace: grace}.end()
		close(swept)
	}()
	// Each round of the sweep waits on a timer: let it through, a sweepPoll later, until the
	// sweep ends.
	rounds, stop := context.WithCancel(ctx)
	defer stop()
	go func() { <-swept; stop() }()
	start := clock.Now()
	for {
		call, err := polls.Wait(rounds)
		if err != nil {
			break
		}
		if clock.Since(start) < grace && len(pidsOf(stray)) == 0 {
			t.Fatalf("the stray died %s into the sweep, before its grace (%s)", clock.Since(start), grace)
		}
		call.MustRelease(ctx)
		clock.Advance(sweepPoll).MustWait(ctx)
	}
	select {
	case <-swept:
	default:
		t.Fatal("the sweep did not end")
	}
	if p := pidsOf(stray); len(p) > 0 {
		t.Errorf("the stray %v survived the sweep", p)
	}
	if clock.Since(start) < grace {
		t.Errorf("the sweep ended %s in, before the grace (%s)", clock.Since(start), grace)
	}
}
