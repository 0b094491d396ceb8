package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun: the usage, and the exit code of each way a verb can end: 0, its own code, 1 with
// the error said, 2 for no verb or an unknown one.
func TestRun(t *testing.T) {
	t.Parallel()
	vs := []verb{
		{Name: "ok", Summary: "succeeds", Run: func(context.Context, []string, io.Writer, io.Writer) error { return nil }},
		{Name: "three", Summary: "exits 3", Run: func(context.Context, []string, io.Writer, io.Writer) error { return sandboxcmd.ExitCode(3) }},
		{Name: "fails", Summary: "fails", Run: func(context.Context, []string, io.Writer, io.Writer) error { return errors.New("it broke") }},
	}
	const list = "hangar-envd: what hangar runs inside a sandbox.\n\nUsage: hangar-envd <command> [flags]\n\nCommands:\n" +
		"  ok       succeeds\n  three    exits 3\n  fails    fails\n\nRun 'hangar-envd <command> --help' for a command's flags.\n"
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, says string
	}{
		{nil, 2, list, ""},
		{[]string{"--help"}, 0, list, ""},
		{[]string{"help"}, 0, list, ""},
		{[]string{"ok"}, 0, "", ""},
		{[]string{"three"}, 3, "", ""},
		{[]string{"fails"}, 1, "", "hangar-envd fails: it broke\n"},
		{[]string{"nope"}, 2, "", "hangar-envd: unknown command \"nope\" (run 'hangar-envd --help' for the list)\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), vs, tc.args, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.says {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.says)
		}
	}
}

// TestEveryVerbHasHelp: each verb but version answers --help with its usage and exits 0.
func TestEveryVerbHasHelp(t *testing.T) {
	t.Parallel()
	for _, v := range verbs() {
		if v.Name == "version" { // takes nothing, --help neither
			continue
		}
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), verbs(), []string{v.Name, "--help"}, &stdout, &stderr)
		if said := stdout.String() + stderr.String(); code != 0 || (!strings.Contains(said, "hangar-envd "+v.Name) && !strings.Contains(said, "--")) {
			t.Errorf("hangar-envd %s --help: exit %d, printed %q", v.Name, code, said)
		}
	}
}

// TestTurnDirExitCodes: turn-dir read tells "not there" (3), "not hangar's alone" (4) and any
// other failure (1, with why) apart, and none of them is 2, what an unknown verb exits with
// (an older hangar-envd without turn-dir).
func TestTurnDirExitCodes(t *testing.T) {
	t.Parallel()
	private := t.TempDir()
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"missing file", []string{"turn-dir", "read", "--dir", private, "--file", "status.json"}, 3, ""},
		{"not private", []string{"turn-dir", "read", "--dir", open, "--file", "status.json"}, 4, "not hangar's alone"},
		{"no directory", []string{"turn-dir", "read", "--dir", filepath.Join(private, "gone"), "--file", "status.json"}, 1, "no such file or directory"},
		{"unknown verb", []string{"turn-dirx"}, 2, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code := run(context.Background(), verbs(), tc.args, &out, &out)
			if code != tc.code || !strings.Contains(out.String(), tc.says) {
				t.Errorf("exit %d, said %q; want exit %d saying %q", code, out.String(), tc.code, tc.says)
			}
		})
	}
}
