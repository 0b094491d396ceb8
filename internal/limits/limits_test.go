package limits

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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

// TestRaiseOpenFiles: a soft RLIMIT_NOFILE below the hard limit is raised to it. The test runs
// itself again (a child, so that this process's limit is left alone) with the soft limit
// lowered to 64 by prlimit, the way a shell's ulimit -n would leave it.
func TestRaiseOpenFiles(t *testing.T) {
	t.Parallel()
	if os.Getenv("LIMITS_RAISE_CHILD") == "1" {
		return
	}
	lim, err := OpenFilesLimit()
	if err != nil {
		t.Fatal(err)
	}
	if lim.Hard <= 128 {
		t.Skipf("the hard RLIMIT_NOFILE is %d here: too low to see a raise", lim.Hard)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRaiseOpenFilesChild$", "-test.v")
	cmd.Env = append(os.Environ(), "LIMITS_RAISE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("raised 64 -> %d of %d", lim.Hard, lim.Hard)
	if !strings.Contains(string(out), want) {
		t.Errorf("the child says:\n%s\nwant %q", out, want)
	}
}

// TestRaiseOpenFilesChild is TestRaiseOpenFiles's child: it lowers its own soft limit, raises
// it again and says what it saw.
func TestRaiseOpenFilesChild(t *testing.T) {
	if os.Getenv("LIMITS_RAISE_CHILD") != "1" {
		t.Skip("run by TestRaiseOpenFiles")
	}
	lim, err := OpenFilesLimit()
	if err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 64, Max: lim.Hard}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	got, err := RaiseOpenFiles(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	now, err := OpenFilesLimit()
	if err != nil {
		t.Fatal(err)
	}
	if got != now {
		t.Errorf("RaiseOpenFiles says %+v, the kernel %+v", got, now)
	}
	if !strings.Contains(logged.String(), fmt.Sprintf("soft=%d", now.Soft)) {
		t.Errorf("logged %q, want the new limit at debug", logged.String())
	}
	fmt.Printf("raised 64 -> %d of %d\n", now.Soft, now.Hard)
}
