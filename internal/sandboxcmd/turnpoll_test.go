package sandboxcmd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/internal/harness"
)

// TestTurnPoll: one turn-poll answers the status (or the harness's liveness, with no status)
// and the run log from the offset, within its limit; a directory another uid could write is
// refused as turn-dir refuses it.
func TestTurnPoll(t *testing.T) {
	dir, err := harness.MakeTurnDir(filepath.Join(t.TempDir(), "turns"), "turn_x")
	if err != nil {
		t.Fatal(err)
	}
	d, err := harness.OpenTurnDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	me := os.Getpid()
	start, err := harness.ProcStart(me)
	if err != nil {
		t.Fatal(err)
	}
	poll := func(offset int64, limit, pid int, start uint64) string {
		t.Helper()
		out, err := turnPoll(dir, offset, limit, pid, start)
		if err != nil {
			t.Fatalf("turn-poll: %v", err)
		}
		return string(out)
	}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"no log yet, the harness runs", poll(0, 1000, me, start), "running 0 936\n"},
		{"no log yet, pid unknown", poll(0, 1000, 0, 0), "running 0 936\n"},
		{"the harness gone (another start time)", poll(0, 1000, me, start+1), "gone 0 936\n"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	if err := harness.AppendTurnFile(d, harness.RunLogFile, []byte("line 1\nline 2\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := poll(7, 1000, me, start), "running 0 936\nline 2\n"; got != want {
		t.Errorf("from offset 7: %q, want %q", got, want)
	}
	if err := harness.WriteTurnFile(d, harness.StatusFile, []byte(`{"exit_code":0}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"ended", poll(0, 1000, me, start+1), "ended 15 921\n{\"exit_code\":0}line 1\nline 2\n"},
		{"the log cut to the room the status leaves", poll(0, 64+15+3, me, start), "ended 15 3\n{\"exit_code\":0}lin"},
		{"the status alone", poll(0, 0, me, start), "ended 15 0\n{\"exit_code\":0}"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := turnPoll(dir, 0, 1000, me, start); !errors.Is(err, harness.ErrNotPrivate) {
		t.Errorf("a directory others may write: %v, want ErrNotPrivate", err)
	}
}
