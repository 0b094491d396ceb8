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
