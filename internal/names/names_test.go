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
