package sandboxcmd

import "runtime"

// daemonMaxProcs bounds the daemon's GOMAXPROCS unless the environment sets it. The daemon runs
// in every sandbox beside the work it serves, moving bytes between pipes and sockets: on a large
// machine the default (one per CPU) would let it run, and keep, a thread per CPU; four keep up
// with the figures in docs/envd.md and keep its threads under 16.
//
// GOGC is left at Go's default: measured with scripts/bench/envd, GOGC=50 cost about a fifth
// of one stream's throughput, and a soft memory limit (GOMEMLIMIT=24MiB) two thirds of it, for
// little memory; what bounds the daemon's memory under a flood is the starter's queue
// (daemon.Config.StarterQueueBytes).
const daemonMaxProcs = 4

// maxProcs is the GOMAXPROCS the daemon sets, given the environment (getenv) and the current
// GOMAXPROCS; 0 leaves it as it is.
func maxProcs(getenv func(string) (string, bool), procs int) int {
	if _, ok := getenv("GOMAXPROCS"); !ok && procs > daemonMaxProcs {
		return daemonMaxProcs
	}
	return 0
}

// tuneRuntime applies maxProcs.
func tuneRuntime(getenv func(string) (string, bool)) {
	if n := maxProcs(getenv, runtime.GOMAXPROCS(0)); n != 0 {
		runtime.GOMAXPROCS(n)
	}
}
