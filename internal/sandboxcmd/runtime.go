package sandboxcmd

import (
	"runtime"
	"runtime/debug"
)

// The daemon runs in every sandbox beside the work it serves: its runtime is set for a small,
// steady footprint rather than for the machine's size, unless the environment (GOMAXPROCS,
// GOGC, GOMEMLIMIT) says otherwise. Measured with scripts/bench/envd (docs/envd.md):
//
//   - GOMAXPROCS at most 4: on a large machine the default (one per CPU) would let the daemon
//     run, and keep, a thread per CPU for moving bytes between pipes and sockets.
//   - GOGC 400 under a soft memory limit of 20 MiB: the daemon's live heap is small (a few MB;
//     the starter's queue, 1 MiB, bounds what a fast process leaves waiting), so at Go's
//     default the heap target is small too and a stream moving output as fast as it can
//     spends its time collecting: 247 MiB/s, against 370 MiB/s with these two, for ~25 MB RSS
//     at the peak instead of ~19. The limit keeps the heap from growing past 20 MiB with GOGC
//     that high (a limit alone, at GOGC 100, cost two thirds of the throughput).
const (
	daemonMaxProcs    = 4
	daemonGCPercent   = 400
	daemonMemoryLimit = 20 << 20
)

// runtimeSettings is what the daemon sets, given the environment (getenv) and the current
// GOMAXPROCS; a zero field leaves that setting as it is.
type runtimeSettings struct {
	maxProcs    int
	gcPercent   int
	memoryLimit int64
}

func runtimeDefaults(getenv func(string) (string, bool), procs int) runtimeSettings {
	var s runtimeSettings
	if _, ok := getenv("GOMAXPROCS"); !ok && procs > daemonMaxProcs {
		s.maxProcs = daemonMaxProcs
	}
	if _, ok := getenv("GOGC"); !ok {
		s.gcPercent = daemonGCPercent
	}
	if _, ok := getenv("GOMEMLIMIT"); !ok {
		s.memoryLimit = daemonMemoryLimit
	}
	return s
}

// tuneRuntime applies runtimeDefaults.
func tuneRuntime(getenv func(string) (string, bool)) {
	s := runtimeDefaults(getenv, runtime.GOMAXPROCS(0))
	if s.maxProcs != 0 {
		runtime.GOMAXPROCS(s.maxProcs)
	}
	if s.memoryLimit != 0 {
		debug.SetMemoryLimit(s.memoryLimit)
	}
	if s.gcPercent != 0 {
		debug.SetGCPercent(s.gcPercent)
	}
}
