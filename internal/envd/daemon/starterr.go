package daemon

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/limits"
)

// startError is the answer to a Start whose program could not be started (what says which). A daemon that lacks something the kernel gives (descriptors,
// processes, memory, disk) is out of a resource, not asked for something wrong: it answers
// ResourceExhausted with a message that starts "the daemon is out of <what>" (hangar's client
// reads what from it, envd.Exhausted), so the caller is told to try again later. Only what is
// wrong with the request itself — no such program, one it may not run, a cwd that is not a
// directory — is InvalidArgument, as it always was (E2B's SDKs raise it as a bad command).
// Anything else is Internal.
func startError(what string, err error) error {
	if out := exhausted(err); out != "" {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the daemon is out of %s: %s: %w", out, what, err))
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, exec.ErrDot):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", what, err))
	case errors.As(err, &errno):
		switch errno {
		case syscall.ENOENT, syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.ENOTDIR, syscall.EISDIR,
			syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG, syscall.ETXTBSY:
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", what, err))
		}
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s: %w", what, err))
}

// setupError is the answer to a Start that failed before its program, while doing what
// (opening a pipe or a pty): the daemon is out of a resource (as in startError), or it is the
// daemon's own failure (Internal) — never the request's.
func setupError(what string, err error) error {
	if out := exhausted(err); out != "" {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the daemon is out of %s: %s: %w", out, what, err))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s: %w", what, err))
}

// exhausted names the resource err says the daemon is out of, or "" when it says none.
// EAGAIN from fork is RLIMIT_NPROC (or the pid limit of its cgroup).
func exhausted(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE:
		return "file descriptors"
	case syscall.EAGAIN:
		return "processes"
	case syscall.ENOMEM:
		return "memory"
	case syscall.ENOSPC, syscall.EDQUOT:
		return "disk space"
	}
	return ""
}

// withOpenFiles adds to err, a start refused for want of descriptors (EMFILE), how many
// processes the daemon runs and its limit, so that whoever reads it knows what ran out and
// what to raise. Any other error is returned as it is.
func (d *Daemon) withOpenFiles(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || !errors.Is(err, syscall.EMFILE) {
		return err
	}
	lim, lerr := limits.OpenFilesLimit()
	if lerr != nil {
		return err
	}
	return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w (%d processes run, and the daemon may open %d files: raise its RLIMIT_NOFILE, or end some)",
		ce.Unwrap(), len(d.procs.list()), lim.Soft))
}
