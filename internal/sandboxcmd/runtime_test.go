package sandboxcmd

import "testing"

func TestRuntimeDefaults(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name              string
		env               map[string]string
		procs             int
		wantGC, wantProcs int
	}{
		{"small machine", nil, 2, 50, 0},
		{"large machine", nil, 64, 50, 4},
		{"GOGC set", map[string]string{"GOGC": "200"}, 2, 0, 0},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "32"}, 32, 50, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gc, procs := runtimeDefaults(env(tc.env), tc.procs)
			if gc != tc.wantGC || procs != tc.wantProcs {
				t.Errorf("runtimeDefaults = GC %d, GOMAXPROCS %d; want %d, %d (0: left as it is)", gc, procs, tc.wantGC, tc.wantProcs)
			}
		})
	}
}
