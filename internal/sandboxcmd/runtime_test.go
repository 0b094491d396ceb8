package sandboxcmd

import "testing"

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
