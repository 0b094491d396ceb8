package names

import (
	"strings"
	"testing"
)

func TestCheckSandbox(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"a": true, "dev-1": true, "0abc": true, "": false, "-a": false, "a-": false, "A": false,
		"a_b": false, "../x": false, "a.b": false, strings.Repeat("a", 64): false,
		strings.Repeat("a", 63): true,
	} {
		if err := CheckSandbox(name); (err == nil) != ok {
			t.Errorf("CheckSandbox(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

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

func TestCheckLabelSaysWhichName(t *testing.T) {
	t.Parallel()
	err := CheckLabel("session name", "S/1")
	if err == nil || !strings.HasPrefix(err.Error(), `session name "S/1"`) {
		t.Errorf("CheckLabel = %v, want it to name the session name", err)
	}
	if err := CheckLabel("session name", strings.Repeat("s", 1<<20)); err == nil || len(err.Error()) > 200 {
		t.Errorf("CheckLabel of a 1 MiB name = %d bytes of error, want it refused in a line", len(err.Error()))
	}
}
