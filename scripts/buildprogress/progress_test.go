// Package buildprogress holds progress.sh, through which `make run` passes its build's output
// (go build -v) so that a first build shows it is getting on; this test runs it.
package buildprogress

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestProgress: package names are counted, not printed; every other line passes as it is, a
// last line without its newline too; the count closes the output. A build that compiled
// nothing (a warm cache) prints nothing more.
func TestProgress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"go: downloading golang.org/x/sys v0.30.0\ngithub.com/a/b\nfmt\n# github.com/a/c\nc.go:1:2: undefined: x\nlast/pkg",
			"go: downloading golang.org/x/sys v0.30.0\n# github.com/a/c\nc.go:1:2: undefined: x\n  compiled 3 packages in Ns\n"},
		{"CGO_ENABLED=0 go build -trimpath -o bin/hangar ./cmd/hangar\n", "CGO_ENABLED=0 go build -trimpath -o bin/hangar ./cmd/hangar\n"},
		{"", ""},
	} {
		cmd := exec.Command("bash", "progress.sh")
		cmd.Stdin = strings.NewReader(c.in)
		cmd.Env = []string{"EVERY=600"} // no line of its own before the end: the input is all there
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("progress.sh: %v", err)
		}
		if got := regexp.MustCompile(`in \d+s`).ReplaceAllString(string(out), "in Ns"); got != c.want {
			t.Errorf("progress.sh on %q printed\n%q\nwant\n%q", c.in, got, c.want)
		}
	}
}
