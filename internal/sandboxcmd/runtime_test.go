package sandboxcmd

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestRuntimeDefaults(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		procs int
		want  runtimeSettings
	}{
		{"small machine", nil, 2, runtimeSettings{0, 400, 20 << 20}},
		{"large machine", nil, 64, runtimeSettings{4, 400, 20 << 20}},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "32"}, 32, runtimeSettings{0, 400, 20 << 20}},
		{"GOGC set", map[string]string{"GOGC": "100"}, 2, runtimeSettings{0, 0, 20 << 20}},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 2, runtimeSettings{0, 400, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := runtimeDefaults(env(tc.env), tc.procs); got != tc.want {
				t.Errorf("runtimeDefaults = %+v, want %+v (0: left as it is)", got, tc.want)
			}
		})
	}
}

// TestMemoryLimitFollowsProcesses: the soft memory limit the daemon sets rises by
// daemonMemoryPerProcess for each process running at once, at the most so far, and stays
// there as they end; a GOMEMLIMIT from the environment stays as it is. Not parallel: it sets
// this process's runtime.
func TestMemoryLimitFollowsProcesses(t *testing.T) {
	procs, gc, limit := runtime.GOMAXPROCS(0), debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(gc)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})

	running := tuneRuntime(func(string) (string, bool) { return "", false })
	if running == nil {
		t.Fatal("tuneRuntime set the memory limit but gave nothing to move it with")
	}
	for _, step := range []struct{ running, most int }{{0, 0}, {1, 1}, {512, 512}, {3, 512}, {0, 512}, {600, 600}} {
		running(step.running)
		if got, want := debug.SetMemoryLimit(-1), int64(20<<20+step.most*64<<10); got != want {
			t.Errorf("%d processes running, %d at the most: limit %d, want %d", step.running, step.most, got, want)
		}
	}

	debug.SetMemoryLimit(1 << 30)
	if running := tuneRuntime(func(k string) (string, bool) { return "1GiB", k == "GOMEMLIMIT" }); running != nil {
		t.Error("GOMEMLIMIT is set, yet tuneRuntime gave a function that moves the limit")
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT is set: limit %d, want it left at %d", got, 1<<30)
	}
}
