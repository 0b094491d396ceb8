package sandboxcmd

import "testing"

func TestMaxProcs(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		procs int
		want  int
	}{
		{"small machine", nil, 2, 0},
		{"four CPUs", nil, 4, 0},
		{"large machine", nil, 64, 4},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "32"}, 32, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := maxProcs(env(tc.env), tc.procs); got != tc.want {
				t.Errorf("maxProcs = %d, want %d (0: left as it is)", got, tc.want)
			}
		})
	}
}
