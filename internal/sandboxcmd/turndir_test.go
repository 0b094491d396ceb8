package sandboxcmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	verbs := []Verb{{Name: "turn-dir", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return TurnDir(ctx, "turn-dir", args, stdout, stderr)
	}}}
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
			var out bytes.Buffer
			code := Main(context.Background(), "hangar-envd", "", verbs, tc.args, &out, &out)
			if code != tc.code || !strings.Contains(out.String(), tc.says) {
				t.Errorf("exit %d, said %q; want exit %d saying %q", code, out.String(), tc.code, tc.says)
			}
		})
	}
}
