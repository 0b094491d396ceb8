package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
)

// stat is what the provider reads of /proc/<pid>/stat.
type stat struct {
	state     byte
	tty       int // the controlling terminal's device number; 0: none
	startTime uint64
}

// gone reports whether the process has ended: a zombie, or dead.
func (st stat) gone() bool { return st.state == 'Z' || st.state == 'X' }

// procReader reads files of /proc with plain system calls into one buffer it reuses: Destroy
// reads a file or two of every process on the machine, and os.ReadFile adds a stat, a poller
// registration and an allocation to each. It is not safe for concurrent use.
type procReader struct{ buf []byte }

// read returns the contents of path, valid until the next read.
func (r *procReader) read(path string) ([]byte, error) {
	fd, err := retry(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 4096)
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := retry(func() (int, error) { return syscall.Read(fd, r.buf[n:]) })
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return r.buf[:n], nil
		}
		n += m
	}
}

// retry calls f again while it is interrupted by a signal.
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// stat reads /proc/<pid>/stat.
func (r *procReader) stat(pid int) (stat, error) {
	b, err := r.read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	return parseStat(b)
}

func procStat(pid int) (stat, error) {
	r := procReader{buf: make([]byte, 512)} // a stat file is some 300 bytes
	return r.stat(pid)
}

// readStat reads a stat file: /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat.
func (r *procReader) readStat(path string) (stat, error) {
	b, err := r.read(path)
	if err != nil {
		return stat{}, err
	}
	return parseStat(b)
}

// parseStat parses the contents of a stat file.
func parseStat(b []byte) (stat, error) {
	// The command name is in parentheses and may itself hold spaces and parentheses: the
	// fields that matter come after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, errors.New("malformed stat")
	}
	var f [20][]byte // state, ppid, pgrp, session, tty_nr, … starttime (fields 3 to 22)
	n := 0
	for field := range bytes.FieldsSeq(b[i+1:]) {
		if n == len(f) {
			break
		}
		f[n] = field
		n++
	}
	if n < len(f) {
		return stat{}, errors.New("short stat")
	}
	var st stat
	var err error
	st.state = f[0][0]
	st.tty, _ = strconv.Atoi(string(f[4]))
	st.startTime, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return st, nil
}

// pids lists the processes in /proc: one pass over /proc is one call, and the few system calls
// that each caller makes per pid.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// inSession reports whether process pid is in the session sid: getsid(2), a system call, where
// reading /proc/<pid>/stat is three and has the kernel format every field.
func inSession(pid, sid int) bool {
	s, err := unix.Getsid(pid)
	return err == nil && s == sid
}

// alive reports whether the daemon's process still runs (or is stopped): the same pid with the
// same start time, and not a zombie waiting for a parent that never reaps it.
func alive(d *daemonRecord) bool {
	if d == nil || d.PID <= 0 {
		return false
	}
	st, err := procStat(d.PID)
	if err != nil || st.gone() {
		return false
	}
	return d.StartTime == 0 || st.startTime == d.StartTime
}

// signalSession sends sigs, in order, to the process group sid and to every other process of
// the session sid (the daemon may start commands in groups of their own), in one pass over
// /proc.
func signalSession(sid int, sigs ...syscall.Signal) {
	if sid <= 1 {
		return
	}
	for _, sig := range sigs {
		_ = syscall.Kill(-sid, sig)
	}
	for _, pid := range pids() {
		if !inSession(pid, sid) {
			continue
		}
		if pgrp, err := unix.Getpgid(pid); err == nil && pgrp != sid {
			for _, sig := range sigs {
				_ = syscall.Kill(pid, sig)
			}
		}
	}
}

// waitDead waits until the daemon is gone or timeout passes; it reports whether it is gone. It
// waits on a pidfd, which poll(2) reports readable once the process has exited, so a daemon
// that takes seconds to shut down costs no CPU meanwhile; where pidfds are refused (an old
// kernel, a seccomp profile) it polls /proc.
func waitDead(ctx context.Context, clock quartz.Clock, d *daemonRecord, timeout time.Duration) bool {
	deadline := clock.NewTimer(timeout, "local", "dead", "timeout")
	defer deadline.Stop()
	exited, err := watchExit(d)
	if err != nil {
		return pollDead(ctx, clock, d, deadline)
	}
	defer exited.stop()
	select {
	case <-exited.done:
		return true
	case <-ctx.Done():
	case <-deadline.C:
	}
	return !alive(d)
}

// pollDead polls /proc until the daemon is gone, ctx ends or deadline fires.
func pollDead(ctx context.Context, clock quartz.Clock, d *daemonRecord, deadline *quartz.Timer) bool {
	tick := clock.NewTicker(20*time.Millisecond, "local", "dead", "poll")
	defer tick.Stop()
	for {
		if !alive(d) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// exitWatch is a pidfd being waited on, through the runtime's poller.
type exitWatch struct {
	f    *os.File
	done chan struct{} // closed once the process has exited
	end  chan struct{} // closed once the waiting goroutine returned
}

// watchExit starts waiting for the daemon's exit on a pidfd. done is closed at once when the
// daemon is already gone.
func watchExit(d *daemonRecord) (*exitWatch, error) {
	w := &exitWatch{done: make(chan struct{}), end: make(chan struct{})}
	fd, err := unix.PidfdOpen(d.PID, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(w.done)
		close(w.end)
		return w, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open pidfd of %d: %w", d.PID, err)
	}
	w.f = os.NewFile(uintptr(fd), "pidfd")
	// The pidfd is of whatever process had the pid when it was opened: the daemon only if it is
	// still alive now (its start time matches), as a pid is not reused while a pidfd holds it.
	if !alive(d) {
		close(w.done)
		close(w.end)
		return w, nil
	}
	raw, err := w.f.SyscallConn()
	if err != nil {
		w.f.Close()
		return nil, fmt.Errorf("wait on pidfd of %d: %w", d.PID, err)
	}
	go func() {
		defer close(w.end)
		// Read waits in the poller for the pidfd to be readable, then asks again.
		err := raw.Read(func(fd uintptr) bool {
			n, _ := retry(func() (int, error) {
				return unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			})
			return n > 0
		})
		if err == nil {
			close(w.done)
		}
	}()
	return w, nil
}

// stop ends the wait and closes the pidfd.
func (w *exitWatch) stop() {
	if w.f == nil {
		return
	}
	// A deadline in the past wakes the waiting goroutine.
	_ = w.f.SetReadDeadline(time.Unix(1, 0))
	<-w.end
	w.f.Close()
}

// stopPoll is how often waitStopped looks at /proc: a stop takes effect within a scheduler
// tick or two, so a few milliseconds keeps Pause quick without busy-looping.
const stopPoll = 5 * time.Millisecond

// waitStopped polls until every thread of every process of the session sid is stopped (or a
// zombie), or ctx ends. SIGSTOP is asynchronous: kill(2) returns once the signal is queued and
// a thread stops only when it is next scheduled, which on a busy machine can be many
// milliseconds later. Pause waits here so that "paused" means stopped.
func waitStopped(ctx context.Context, clock quartz.Clock, sid int) error {
	tick := clock.NewTicker(stopPoll, "local", "stopped")
	defer tick.Stop()
	var r procReader
	for {
		if r.sessionStopped(sid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for session %d to stop: %w", sid, ctx.Err())
		case <-tick.C:
		}
	}
}

// sessionStopped reports whether no thread of the session sid can run.
func (r *procReader) sessionStopped(sid int) bool {
	for _, pid := range pids() {
		if inSession(pid, sid) && !r.tasksStopped(pid) {
			return false
		}
	}
	return true
}

// tasksStopped reports whether every thread of process pid is stopped or has ended.
func (r *procReader) tasksStopped(pid int) bool {
	task := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(task)
	if err != nil {
		return true // the process ended meanwhile
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	for _, tid := range tids {
		st, err := r.readStat(task + tid + "/stat")
		if err == nil && !strings.ContainsRune("TtZX", rune(st.state)) {
			return false
		}
	}
	return true
}

// markerEnv is set, to the sandbox's folder, in the environment of the sandbox's daemon and of
// every command the provider runs, so Destroy finds their processes wherever they went.
const markerEnv = "HANGAR_LOCAL_SANDBOX"

// killRounds bounds how many times killInside looks again: a process may fork while it is
// killed, and a kill takes effect a little after kill(2) returns.
const killRounds = 50

// killInside kills (SIGKILL) what is left of the daemon's session sid (none when sid is 0:
// only while the daemon lives is sid known to be its session's), every process without a
// controlling terminal whose working directory is dir or inside it, and every process whose
// environment has markerEnv=dir: what a sandbox's commands and agents started, detached
// (setsid, double fork, nohup) or not, and ignoring SIGTERM or not. It looks again until a look
// finds none or ctx ends. Local isolates nothing, so this is a best effort: a process that left
// the session and the folder and dropped the marker (the daemon starts commands without it) is
// not found; a person's shell that cd'd into the folder has a terminal, and is left alone.
func killInside(ctx context.Context, clock quartz.Clock, dir string, sid int) {
	tick := clock.NewTicker(stopPoll, "local", "kill inside")
	defer tick.Stop()
	var r procReader
	for range killRounds {
		if killed := r.killInsideOnce(dir, sid); killed == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// killInsideOnce sends SIGKILL to the processes killInside looks for, in one pass over /proc,
// and counts them.
func (r *procReader) killInsideOnce(dir string, sid int) int {
	if sid > 1 {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
	}
	self := os.Getpid()
	marker := markerEnv + "=" + dir
	n := 0
	for _, pid := range pids() {
		if pid > 1 && pid != self && r.belongs(pid, dir, marker, sid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// belongs reports whether process pid runs and is the sandbox's: in the session sid (sid > 1),
// or by its working directory (and no terminal), its environment's marker (markerEnv=dir) or,
// where both are hidden, its command line.
func (r *procReader) belongs(pid int, dir, marker string, sid int) bool {
	if sid > 1 && inSession(pid, sid) {
		return r.running(pid, false)
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if r.cwdInside(proc, dir) && r.running(pid, true) {
		return true
	}
	// A process that ended has no environment or command line left.
	env, err := r.read(proc + "/environ")
	if err == nil {
		return hasEntry(env, marker)
	}
	// Not dumpable (a turn's harness is not): its working directory and environment are hidden
	// from a reader without CAP_SYS_PTRACE, its command line is not. It is the sandbox's when
	// an argument is a path inside the folder (the turn's directory).
	return errors.Is(err, fs.ErrPermission) && argInside(pid, dir)
}

// running reports whether process pid has not ended (is no zombie) and, with noTTY, has no
// controlling terminal.
func (r *procReader) running(pid int, noTTY bool) bool {
	st, err := r.stat(pid)
	return err == nil && !st.gone() && (!noTTY || st.tty == 0)
}

// cwdInside reports whether the working directory of the process at proc is dir or inside it.
func (r *procReader) cwdInside(proc, dir string) bool {
	if r.buf == nil {
		r.buf = make([]byte, 4096)
	}
	n, err := syscall.Readlink(proc+"/cwd", r.buf)
	if err != nil || n == len(r.buf) {
		return false // unreadable, or longer than any path the kernel gives
	}
	cwd := r.buf[:n]
	return string(cwd) == dir || len(cwd) > len(dir) && cwd[len(dir)] == '/' && string(cwd[:len(dir)]) == dir
}

// hasEntry reports whether the environment env (NUL-separated) has the entry kv.
func hasEntry(env []byte, want string) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if string(kv) == want {
			return true
		}
	}
	return false
}

// argInside reports whether an argument of process pid's command line is dir or a path inside
// it, and the process has no controlling terminal.
func argInside(pid int, dir string) bool {
	argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, a := range strings.Split(string(argv), "\x00") {
		if a == dir || strings.HasPrefix(a, dir+"/") {
			st, err := procStat(pid)
			return err == nil && st.tty == 0
		}
	}
	return false
}
