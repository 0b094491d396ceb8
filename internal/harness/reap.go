package harness

import (
	"os"
	"os/signal"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reapOrphans reaps, as they die and for the whole turn, the harness's children other than the
// agent: the orphans the agent leaves, which come to the harness as their child subreaper. Left
// as zombies until the turn's sweep, each would hold one of the sandbox's pids (its pids limit)
// for the rest of the turn: the killed children of a fork bomb would keep it exhausted.
//
// The agent is never reaped here: its exit status is its exec.Cmd's, which waits for that one
// pid (waitid on its pidfd, or on its pid). On each SIGCHLD, a dead child is peeked at with
// waitid(P_ALL, WNOWAIT), which leaves it waitable, and reaped (wait4 on its pid) only if it is
// not the agent. The peek reports a dead agent again until its exec.Cmd has reaped it, so once
// it has seen the agent dead the reaper peeks no more until exited is closed (the agent reaped);
// from then on the agent's pid is nobody's in particular, and a later child given it is reaped
// like any other. This is race-free where a list of the children
// (/proc/<pid>/task/<tid>/children) is not: that list is only reliable when the children are
// stopped, and a child read from it can die and be reaped between the read and the wait,
// whereas the kernel answers the peek from its own list of children, and a pid the agent holds
// can be no other child's until the agent is reaped.
//
// Every peek either reaps a zombie or is followed by a wait on an event (a SIGCHLD, exited,
// stop): the work is one peek and one reap per orphan that dies, never a busy loop. stop ends
// the reaping and returns once it has ended.
func reapOrphans(agent int, exited <-chan struct{}) (stop func()) {
	chld := make(chan os.Signal, 1)
	// SIGCHLD is caught before the first peek: a child that died before is found by that peek,
	// one that dies after it sends a SIGCHLD the channel holds (a buffer of one: signals that
	// come while it is full are one round of peeks all the same).
	signal.Notify(chld, unix.SIGCHLD)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			pid := deadChild()
			switch {
			case pid == agent:
				select {
				case <-exited:
					agent = 0 // no child has pid 0
					continue
				case <-quit:
					return
				}
			case pid > 0:
				if got, _ := unix.Wait4(pid, nil, unix.WNOHANG, nil); got == pid {
					continue
				}
				// Reaped meanwhile, by the sweep at the turn's end, which then reaps the rest.
			}
			select {
			case <-chld:
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(chld)
		close(quit)
		<-done
	}
}

// deadChild returns the pid of a child of the harness that has exited and not been reaped,
// leaving it unreaped (WNOWAIT), or 0 if there is none.
func deadChild() int {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return 0 // ECHILD: no child at all
	}
	return siginfoPid(&info) // 0 (the kernel zeroes it) when no child has exited
}

// siginfoPid is si_pid, which unix.Siginfo does not name: the first field of the union that
// follows si_signo, si_errno and si_code (three int32s), which is aligned as a pointer is.
func siginfoPid(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (3*unsafe.Sizeof(int32(0)) + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
