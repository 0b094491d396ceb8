package sandboxcmd

import (
	"runtime"
	"runtime/debug"
)

// The daemon runs in every sandbox, beside the work it serves: its runtime is set for a small
// footprint rather than for the machine's size, unless GOGC or GOMAXPROCS say otherwise.
const (
	// daemonGCPercent lets the heap grow by half its live size between collections instead
	// of all of it. Measured with scripts/bench/envd (bench/README.md): one stream moving
	// 256 MiB as fast as its client reads peaked at ~20 MB RSS instead of ~47 MB, with no
	// loss of throughput or latency in the same runs; a soft memory limit (GOMEMLIMIT=24MiB) instead cost two
	// thirds of the throughput.
	daemonGCPercent = 50
	// daemonMaxProcs bounds GOMAXPROCS: on a large machine the default (one per CPU) would let
	// the daemon run, and keep, a thread per CPU for work that is moving bytes between pipes
	// and sockets; four keep up with the figures above and keep the thread count under 16.
	daemonMaxProcs = 4
)

// runtimeDefaults are the GC percent and GOMAXPROCS the daemon sets, given the environment
// (getenv) and the current GOMAXPROCS; 0 leaves one as it is.
func runtimeDefaults(getenv func(string) (string, bool), procs int) (gcPercent, maxProcs int) {
	if _, ok := getenv("GOGC"); !ok {
		gcPercent = daemonGCPercent
	}
	if _, ok := getenv("GOMAXPROCS"); !ok && procs > daemonMaxProcs {
		maxProcs = daemonMaxProcs
	}
	return gcPercent, maxProcs
}

// tuneRuntime applies runtimeDefaults.
func tuneRuntime(getenv func(string) (string, bool)) {
	gc, procs := runtimeDefaults(getenv, runtime.GOMAXPROCS(0))
	if gc != 0 {
		debug.SetGCPercent(gc)
	}
	if procs != 0 {
		runtime.GOMAXPROCS(procs)
	}
}
