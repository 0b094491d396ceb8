package sandboxcmd

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hideMemory makes this process not dumpable (prctl PR_SET_DUMPABLE 0), so that no other
// process without CAP_SYS_PTRACE reads its memory or environment: /proc/<pid>/mem, environ,
// maps, fd and cwd then answer EACCES to every other process, those of its own uid and root in a
// container included (Docker and Kubernetes drop CAP_SYS_PTRACE), and it cannot be ptraced. The
// daemon keeps the access tokens of the requests it has read in memory, and the harness the
// agent's environment (a session's API keys): both call it before they read either. It holds
// for this process only: a program it execs is dumpable again (the kernel resets the flag at
// execve for a program that changes no credentials), so the agent and the commands are as
// they were. /proc/<pid>/cmdline and stat stay readable by all, as for any process: neither
// holds a secret.
func hideMemory() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make this process not dumpable: %w", err)
	}
	return nil
}
