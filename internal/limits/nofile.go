package limits

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"
)

// OpenFiles is the process's limit on open file descriptors (RLIMIT_NOFILE).
type OpenFiles struct {
	Soft, Hard uint64
}

// OpenFilesLimit reads the process's RLIMIT_NOFILE.
func OpenFilesLimit() (OpenFiles, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return OpenFiles{}, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	return OpenFiles{Soft: lim.Cur, Hard: lim.Max}, nil
}

// RaiseOpenFiles raises the soft RLIMIT_NOFILE to the hard limit, so that a daemon or a
// control plane holding thousands of processes and streams is bounded by what its
// administrator allows (the hard limit), not by the soft default of 1,024 meant for programs
// that use select. It logs the limit at debug and returns it.
//
// Go's runtime raises it at start already, to one below the hard limit (syscall's init,
// go.dev/issue/46279), and gives the programs it starts the original soft limit back. Raising
// it through syscall.Setrlimit would end that (Go then forgets the original), so this raises it
// with prlimit, and only when it is still lower than Go leaves it: when something lowered it
// since, or a Go that no longer does it built the binary.
func RaiseOpenFiles(log *slog.Logger) (OpenFiles, error) {
	lim, err := OpenFilesLimit()
	if err != nil {
		return lim, err
	}
	if lim.Hard != unix.RLIM_INFINITY && lim.Soft+1 < lim.Hard {
		raised := unix.Rlimit{Cur: lim.Hard, Max: lim.Hard}
		if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &raised, nil); err != nil {
			return lim, fmt.Errorf("raise RLIMIT_NOFILE from %d to %d: %w", lim.Soft, lim.Hard, err)
		}
		lim.Soft = lim.Hard
	}
	log.Debug("open files limit (RLIMIT_NOFILE)", "soft", lim.Soft, "hard", lim.Hard)
	return lim, nil
}
