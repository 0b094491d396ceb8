package harness

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
)

// sweepPoll is how often the harness looks again for what is left of a turn while ending it:
// short, since a turn's end waits on it, and a read of /proc costs little.
const sweepPoll = 20 * time.Millisecond

// sweepLimit bounds how long the harness goes on sending SIGKILL after KillGrace: something
// that forks faster than it is killed (or a process stuck in the kernel) cannot hold the turn's
// status file back for ever. What is still there then is named on the harness's stderr.
const sweepLimit = 10 * time.Second

// sweeper finds and ends everything a turn's agent started. The harness is a child subreaper
// (PR_SET_CHILD_SUBREAPER), so a descendant whose parent dies (a double fork, a setsid'd or
// nohup'd child of an agent that exited) is reparented to the harness rather than to init:
// every process the agent started is a descendant of the harness for as long as it lives,
// whatever session or process group it put itself in. In a split turn (the harness root, the
// agent another uid) inside a container, every process of the agent's uid goes too (one it had
// the sandbox's daemon start, say), but for those under another turn's harness.
type sweeper struct {
	self  int    // the harness's pid
	agent int    // the agent's pid: reaped by its exec.Cmd, never here
	uids  bool   // also every process of uid
	uid   uint32 // the agent's uid when uids
	clock quartz.Clock
	grace time.Duration // from SIGTERM to SIGKILL: KillGrace
}

// uidSweep reports whether a split turn's end may take every process of the agent's uid: only
// inside a container (a PID namespace of its own), where every process is the sandbox's. On a
// host (a local sandbox of a hangar serve run as root) that uid may be a person's, with their
// whole desktop under it.
func uidSweep(split bool) bool {
	if !split {
		return false
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	return err == nil && ns != initialPIDNamespace
}

// initialPIDNamespace is the host's PID namespace as /proc names it (the kernel's
// PROC_PID_INIT_INO): the same on every Linux.
const initialPIDNamespace = "pid:[4026531836]"

// proc is what the sweep needs of one process.
type proc struct {
	ppid   int
	zombie bool
}

// end ends every descendant of the harness (the agent included while it runs): SIGTERM to each
// as it is found, then SIGKILL to each every sweepPoll from w.grace (KillGrace) on, until none is left
// or sweepLimit after that. It reaps the harness's zombie children but the agent.
func (w sweeper) end() {
	start := w.clock.Now()
	termed := map[int]bool{}
	for {
		left := w.find()
		if len(left) == 0 {
			return
		}
		since := w.clock.Since(start)
		if since > w.grace+sweepLimit {
			w.say(left)
			return
		}
		for _, pid := range left {
			switch {
			case since >= w.grace:
				unix.Kill(pid, unix.SIGKILL)
			case !termed[pid]:
				unix.Kill(pid, unix.SIGTERM)
				// A stopped process takes SIGTERM only once continued.
				unix.Kill(pid, unix.SIGCONT)
				termed[pid] = true
			}
		}
		<-w.clock.NewTimer(sweepPoll, "harness", "sweep").C
	}
}

// find lists the live processes the sweep must end, and reaps the zombies among the
// harness's children (not the agent: its exec.Cmd waits for it).
func (w sweeper) find() []int {
	procs := readProcs()
	var left []int
	for pid, p := range procs {
		if pid == w.self {
			continue
		}
		if p.zombie {
			if p.ppid == w.self && pid != w.agent {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
			continue
		}
		if w.descends(pid, procs) || (w.uids && w.ofAgentUID(pid) && !w.underHarness(pid, procs)) {
			left = append(left, pid)
		}
	}
	return left
}

// descends reports whether pid's parent chain reaches the harness.
func (w sweeper) descends(pid int, procs map[int]proc) bool {
	for i := 0; i < len(procs) && pid > 1; i++ {
		p, ok := procs[pid]
		if !ok {
			return false
		}
		if p.ppid == w.self {
			return true
		}
		pid = p.ppid
	}
	return false
}

// ofAgentUID reports whether pid runs as the agent's uid (real or effective).
func (w sweeper) ofAgentUID(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			ids := strings.Fields(rest)
			want := strconv.FormatUint(uint64(w.uid), 10)
			return len(ids) >= 2 && (ids[0] == want || ids[1] == want)
		}
	}
	return false
}

// underHarness reports whether pid descends from another turn's harness (a process of another
// uid whose first argument is "harness", as `hangar harness` and `hangar-envd harness` run):
// another split session of the same uid in the same sandbox runs there, and its agent is its
// own harness's to end.
func (w sweeper) underHarness(pid int, procs map[int]proc) bool {
	for i := 0; i < len(procs) && pid > 1; i++ {
		p, ok := procs[pid]
		if !ok {
			return false
		}
		pid = p.ppid
		if pid == w.self || pid <= 1 {
			continue
		}
		argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := bytes.Split(argv, []byte{0}); err == nil && len(args) > 1 && string(args[1]) == "harness" && !w.ofAgentUID(pid) {
			return true
		}
	}
	return false
}

// say names on stderr what the sweep could not end.
func (w sweeper) say(left []int) {
	pids := make([]string, len(left))
	for i, p := range left {
		pids[i] = strconv.Itoa(p)
	}
	os.Stderr.WriteString("hangar harness: still running after SIGKILL: " + strings.Join(pids, " ") + "\n")
}

// readProcs reads every process's parent and whether it is a zombie from /proc. A process that
// ends meanwhile is left out.
func readProcs() map[int]proc {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	procs := make(map[int]proc, len(stats))
	for _, path := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold anything, so the fields after its last ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			continue
		}
		procs[pid] = proc{ppid: ppid, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}
	}
	return procs
}

// becomeSubreaper makes the harness a child subreaper: orphans among its descendants are
// reparented to it, not to init, so the sweep finds them.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
