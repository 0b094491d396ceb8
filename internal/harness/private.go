package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// CheckPrivate checks that the agent's uid cannot write dir, nor replace it: dir is not the
// agent's nor writable by group or others, and no directory above it is the agent's or writable
// by group or others unless sticky (as /tmp is: there nobody may rename what they do not own).
// A split turn keeps its run log and status file in such a directory; one the agent made in
// advance (say /tmp/hangar-turns, made before hangar's) would let it write its own status.
func CheckPrivate(dir string, agentUID uint32) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	for p, last := real, true; ; p, last = filepath.Dir(p), false {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return fmt.Errorf("check %s: %w", p, err)
		}
		sticky := st.Mode&syscall.S_ISVTX != 0 && !last
		switch {
		case st.Uid == agentUID:
			return fmt.Errorf("%s belongs to the agent's uid %d: the agent could replace the turn's status file", p, agentUID)
		case st.Mode&0o022 != 0 && !sticky:
			return fmt.Errorf("%s is writable by group or others (mode %#o): the agent could replace the turn's status file", p, st.Mode&0o7777)
		}
		if p == "/" {
			return nil
		}
	}
}

// ProcStart returns a process's start time, in clock ticks after boot (field 22 of
// /proc/<pid>/stat): with the pid it names one process, never a later one given the same pid.
func ProcStart(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// Alive reports whether the turn whose harness is pid, started at start (ProcStart; 0: not
// known), still runs: the harness leads its own process group; with its start time known, the
// pid must also be that very process, and not a zombie — never a later one given the same pid.
func Alive(pid int, start uint64) bool {
	if start == 0 {
		return unix.Kill(-pid, 0) == nil
	}
	state, got, err := procStat(pid)
	return err == nil && state != "Z" && got == start
}

// procStat returns a process's state (field 3 of /proc/<pid>/stat) and start time (field 22).
func procStat(pid int) (string, uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, fmt.Errorf("read process %d's start time: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold anything: the fields after it
	// are counted from its last ')'.
	i := bytes.LastIndexByte(data, ')')
	fields := bytes.Fields(data[i+1:])
	if i < 0 || len(fields) < 20 {
		return "", 0, fmt.Errorf("read process %d's start time: %q is not a stat line", pid, data)
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("read process %d's start time: %w", pid, err)
	}
	return string(fields[0]), v, nil
}
