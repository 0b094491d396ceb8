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
//   - The limit rises by 64 KiB for each process running at once, at the most so far. A soft
//     limit below what the daemon's work itself holds makes the collector run without end: at
//     512 processes their goroutines' stacks alone were 10 MB and the runtime had 43 MB
//     mapped, so under a fixed 20 MiB the daemon collected about 80 times a second and took
//     half of the machine's two cores (bench/README.md, issue 11). It does not fall when they
//     end: their memory is freed only by the collections a lower limit would force, and the
//     same spin came back when 512 ended together. A higher limit costs nothing at rest, where
//     GOGC sets the heap's goal far below it.
const (
	daemonMaxProcs         = 4
	daemonGCPercent        = 400
	daemonMemoryLimit      = 20 << 20
	daemonMemoryPerProcess = 64 << 10
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

// tuneRuntime applies runtimeDefaults. When it set the memory limit, it returns what raises
// the limit with the processes running (daemon.Config.Running, called in order); else nil.
func tuneRuntime(getenv func(string) (string, bool)) func(running int) {
	s := runtimeDefaults(getenv, runtime.GOMAXPROCS(0))
	if s.maxProcs != 0 {
		runtime.GOMAXPROCS(s.maxProcs)
	}
	if s.gcPercent != 0 {
		debug.SetGCPercent(s.gcPercent)
	}
	if s.memoryLimit == 0 {
		return nil
	}
	debug.SetMemoryLimit(s.memoryLimit)
	most := 0
	return func(running int) {
		if running > most {
			most = running
			debug.SetMemoryLimit(s.memoryLimit + int64(most)*daemonMemoryPerProcess)
		}
	}
}
