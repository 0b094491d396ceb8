package providertest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestModulePath(t *testing.T) {
	t.Parallel()
	for gomod, want := range map[string]string{
		"module github.com/hangar-dev/hangar\n\ngo 1.25\n":           "github.com/hangar-dev/hangar",
		"// a comment\nmodule   \"example.com/x\"  \nrequire y v1\n": "example.com/x",
		"go 1.25\n": "",
		"":          "",
	} {
		if got := modulePath([]byte(gomod)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", gomod, got, want)
		}
	}
}

// TestModuleRoot: walking up from the test's folder finds the go.mod the go command uses.
func TestModuleRoot(t *testing.T) {
	t.Parallel()
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot()
	if want := filepath.Dir(strings.TrimSpace(string(b))); err != nil || root != want {
		t.Errorf("moduleRoot() = %q, %v; want %q", root, err, want)
	}
}
