package sandboxcmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestDaemonNotDumpableAsOtherUID: hangar-envd's daemon run as a uid that is not root (as on a
// local provider, or an image with a USER) makes itself not dumpable — its /proc/<pid> files
// become root's — and still works: it starts commands, which read their own /proc/self, lists
// them, and runs turn-dir and the harness for a turn in a directory of its uid's.
func TestDaemonNotDumpableAsOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root to run the daemon as another uid")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	built, err := providertest.SharedEnvd()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "envd-uid-*") // in /tmp, which that uid can pass through
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	os.Chmod(home, 0o755)
	// A copy that uid can run (the shared build's folder is root's alone).
	b, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(home, "hangar-envd")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(home, "nobody")
	os.Mkdir(own, 0o700)
	os.Chown(own, 65534, 65534)
	addr := filepath.Join(own, "addr")
	token := "t0ken"
	cmd := exec.Command(bin, "envd", "--listen", "127.0.0.1:0", "--address-file", addr, "--workdir", own)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HANGAR_ENVD_ACCESS_TOKEN_SHA256=" + provider.DaemonTokenSHA256(token)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var url string
	for url == "" {
		if b, err := os.ReadFile(addr); err == nil {
			url = "http://" + string(b)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the daemon did not listen: %s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}

	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/environ", &st); err != nil || st.Uid != 0 {
		t.Errorf("the daemon's /proc/<pid>/environ is uid %d's (%v); want root's, as for a process that is not dumpable", st.Uid, err)
	}

	c, err := envd.New(envd.Config{URL: url, AccessToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(name string, args ...string) string {
		t.Helper()
		ps, err := c.Start(ctx, envd.StartRequest{Cmd: name, Args: args})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		defer ps.Close()
		var out bytes.Buffer
		for {
			ev, err := ps.Next()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch ev.Kind {
			case envd.EventStdout, envd.EventStderr:
				out.Write(ev.Data)
			case envd.EventEnd:
				if ev.Exit.Code != 0 {
					t.Fatalf("%s %q: exit %d: %s", name, args, ev.Exit.Code, out.String())
				}
				return out.String()
			}
		}
	}
	if got := run("sh", "-c", "ls /proc/self/fd >/dev/null && grep -c ^Uid /proc/self/status && id -u"); got != "1\n65534\n" {
		t.Errorf("a command reading its own /proc/self printed %q", got)
	}
	if _, err := c.List(ctx); err != nil {
		t.Errorf("list: %v", err)
	}
	dir := strings.TrimSpace(run(bin, "turn-dir", "make", "--root", filepath.Join(own, "turns"), "--id", "turn_a", "--base64", "aGk="))
	if dir != filepath.Join(own, "turns", "turn_a") {
		t.Fatalf("turn-dir make printed %q", dir)
	}
	run(bin, "harness", "--turn-dir", dir, "--", "sh", "-c", `echo "{\"prompt\":\"$1\"}"`, "agent", "{prompt}")
	if got := run(bin, "turn-dir", "read", "--dir", dir, "--file", "run.log"); got != `{"prompt":"hi"}`+"\n" {
		t.Errorf("the turn's run log: %q", got)
	}
}
