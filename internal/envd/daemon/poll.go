package daemon

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A daemon in every sandbox must not cost an OS thread per process it runs. Go parks a
// goroutine that waits on a descriptor registered with the runtime's poller (epoll) without
// a thread, but a blocking system call holds one for as long as it blocks. Two did, per
// process: os.Process.Wait, which blocks in waitid, and reads of a pty's master, which
// creack/pty hands over in blocking mode (its ioctls call Fd, and Fd makes a descriptor
// blocking). 64 processes made ~70 threads; the test TestProcessesDoNotHoldThreads pins this.
// Pipes need nothing: os.Pipe's descriptors are on the poller already.

// pollable returns a descriptor of f's open file in nonblocking mode, registered with the
// runtime's poller (os.NewFile does so for a nonblocking descriptor, and its Fd then leaves
// it nonblocking), and closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("make %s pollable: %w", f.Name(), err)
	}
	var dup int
	var dupErr error
	if err := rc.Control(func(fd uintptr) { dup, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("make %s pollable: %w", f.Name(), err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("make %s pollable: %w", f.Name(), dupErr)
	}
	// O_NONBLOCK belongs to the open file, which f shares until it is closed just after.
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("make %s pollable: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(dup), f.Name()), nil
}

// waitExit waits until the child pid has exited and reaps it. It waits on a pidfd parked in
// the runtime's poller (a pidfd becomes readable when its process exits), opened only now: a
// running process costs the daemon no pidfd (see descriptors in process.go). Then wait4 reaps
// it at once. Without pidfds (Linux before 5.4, or a seccomp filter that refuses them) wait4
// blocks, holding a thread while it waits. pid must be an unreaped child of ours, so that it
// names that process.
func waitExit(pid int) (syscall.WaitStatus, error) {
	if f := pidfdOf(pid); f != nil {
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Read(func(fd uintptr) bool {
				// WNOWAIT: only look; wait4 reaps. Signo stays 0 while it runs.
				var info unix.Siginfo
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
				return err != nil || info.Signo != 0 // an error: let wait4 say it
			})
		}
		f.Close()
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			if err != nil {
				return ws, fmt.Errorf("wait for process %d: %w", pid, err)
			}
			return ws, nil
		}
	}
}

// exitStatus describes how a process ended as os.ProcessState does ("exit status 3",
// "signal: killed"), the words E2B's envd sends.
func exitStatus(ws syscall.WaitStatus) string {
	var s string
	switch {
	case ws.Exited():
		s = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		s = "signal: " + ws.Signal().String()
	default:
		s = "unknown status " + strconv.Itoa(int(ws))
	}
	if ws.CoreDump() {
		s += " (core dumped)"
	}
	return s
}

// pidfdOf opens a pidfd of pid, nonblocking and on the runtime's poller; nil when pidfds are
// not available. pid must be an unreaped child of ours, so that it names that process.
func pidfdOf(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}
