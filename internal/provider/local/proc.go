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
)

// stat is what the provider reads of /proc/<pid>/stat.
type stat struct {
	state     byte
	pgrp, sid int
	tty       int // the controlling terminal's device number; 0: none
	startTime uint64
}

func procStat(pid int) (stat, error) {
	return readStat("/proc/" + strconv.Itoa(pid) + "/stat")
}

// readStat reads a stat file: /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat.
func readStat(path string) (stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, err
	}
	// The command name is in parentheses and may itself hold spaces and parentheses: the
	// fields that matter come after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return stat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return stat{}, errors.New("short stat")
	}
	var st stat
	st.state = f[0][0]
	st.pgrp, _ = strconv.Atoi(f[2])
	st.sid, _ = strconv.Atoi(f[3])
	st.tty, _ = strconv.Atoi(f[4])
	st.startTime, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return st, nil
}

// alive reports whether the daemon's process still runs (or is stopped): the same pid with the
// same start time, and not a zombie waiting for a parent that never reaps it.
func alive(d *daemonRecord) bool {
	if d == nil || d.PID <= 0 {
		return false
	}
	st, err := procStat(d.PID)
	if err != nil {
		return false
	}
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	return d.StartTime == 0 || st.startTime == d.StartTime
}

// signalSession signals the process group sid and every other process of the session sid (the
// daemon may start commands in groups of their own).
func signalSession(sid int, sig syscall.Signal) {
	if sid <= 1 {
		return
	}
	_ = syscall.Kill(-sid, sig)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(pid); err == nil && st.sid == sid && st.pgrp != sid {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// waitDead polls until the daemon is gone or timeout passes; it reports whether it is gone.
func waitDead(ctx context.Context, clock quartz.Clock, d *daemonRecord, timeout time.Duration) bool {
	deadline := clock.NewTimer(timeout, "local", "dead", "timeout")
	defer deadline.Stop()
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
	for {
		if sessionStopped(sid) {
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
func sessionStopped(sid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // nothing to wait on that can be seen
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(pid); err != nil || st.sid != sid {
			continue
		}
		tasks, err := os.ReadDir("/proc/" + e.Name() + "/task")
		if err != nil {
			continue // the process ended meanwhile
		}
		for _, t := range tasks {
			st, err := readStat("/proc/" + e.Name() + "/task/" + t.Name() + "/stat")
			if err != nil {
				continue
			}
			if !strings.ContainsRune("TtZX", rune(st.state)) {
				return false
			}
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

// killInside kills (SIGKILL) every process without a controlling terminal whose working
// directory is dir or inside it, and every process whose environment has markerEnv=dir: what
// a sandbox's commands and agents started, detached (setsid, double fork, nohup) or not, and
// ignoring SIGTERM or not. It looks again until a look finds none or ctx ends. Local isolates
// nothing, so this is a best effort: a process that left the folder and dropped the marker
// (the daemon starts commands without it) is not found; a person's shell that cd'd into the
// folder has a terminal, and is left alone.
func killInside(ctx context.Context, clock quartz.Clock, dir string) {
	tick := clock.NewTicker(stopPoll, "local", "kill inside")
	defer tick.Stop()
	for range killRounds {
		if killed := killInsideOnce(dir); killed == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// killInsideOnce sends SIGKILL to the processes killInside looks for, and counts them.
func killInsideOnce(dir string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	marker := []byte(markerEnv + "=" + dir + "\x00")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		inside := err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
		if inside {
			st, err := procStat(pid)
			inside = err == nil && st.tty == 0
		}
		var env []byte
		if !inside {
			env, err = os.ReadFile("/proc/" + e.Name() + "/environ")
			inside = err == nil && bytes.Contains(append([]byte{0}, env...), append([]byte{0}, marker...))
		}
		if !inside && errors.Is(err, fs.ErrPermission) {
			// Not dumpable (a turn's harness is not): its working directory and environment
			// are hidden from a reader without CAP_SYS_PTRACE, its command line is not. It is
			// the sandbox's when an argument is a path inside the folder (the turn's directory).
			inside = argInside(pid, dir)
		}
		if inside && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
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
