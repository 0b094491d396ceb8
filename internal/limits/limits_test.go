package limits

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckEnv(t *testing.T) {
	t.Parallel()
	longest := strings.Repeat("v", MaxEnvEntry-len("A="))
	for _, c := range []struct {
		env map[string]string
		ok  bool
	}{
		{nil, true},
		{map[string]string{"A": "", "PATH": "/bin", "É": "ü"}, true},
		{map[string]string{"A": longest}, true},
		{map[string]string{"A": longest + "v"}, false},
		{map[string]string{"": "x"}, false},
		{map[string]string{"A=B": "x"}, false},
		{map[string]string{"A\x00": "x"}, false},
		{map[string]string{"A": "x\x00y"}, false},
	} {
		if err := CheckEnv(c.env); (err == nil) != c.ok {
			t.Errorf("CheckEnv(%.40q) = %v, want ok=%v", c.env, err, c.ok)
		}
	}
}

func TestCheckPath(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("n", 255)
	for path, ok := range map[string]bool{
		"/workspace": true, "rel/dir": true, "/" + name + "/" + name: true, strings.Repeat("/d", 2047): true,
		"/" + name + "n": false, strings.Repeat("/d", 2048): false, "/a\x00b": false, "/a\xffb": false, "/é": true,
	} {
		if err := CheckPath(path); (err == nil) != ok {
			t.Errorf("CheckPath(%.40q) = %v, want ok=%v", path, err, ok)
		}
	}
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	for cmd, ok := range map[string]bool{"echo hi": true, "": true, "echo é\xff": true, "echo a\x00b": false} {
		if err := CheckCommand(cmd); (err == nil) != ok {
			t.Errorf("CheckCommand(%q) = %v, want ok=%v", cmd, err, ok)
		}
	}
}
