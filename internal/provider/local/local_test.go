package local

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the hangar binary built once for the package's tests.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

const testTimeout = 30 * time.Second

func newProvider(t *testing.T, dataDir string, mod func(*Config)) (*Provider, *providertest.SyncBuffer) {
	t.Helper()
	logs := &providertest.SyncBuffer{}
	cfg := Config{DataDir: dataDir, EnvdBinary: hangarBin, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, logs
}

func TestSuite(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	providertest.Run(t, func(t *testing.T) provider.Provider {
		p, _ := newProvider(t, dataDir, nil)
		return p
	}, providertest.Options{Daemon: true, NoDaemon: true})
}

func TestNewNeedsDataDir(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a data dir succeeded")
	}
}

func TestCreateWarnsNoIsolation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, logs := newProvider(t, t.TempDir(), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "warned"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "isolates nothing") {
		t.Errorf("log after Create = %q, want a warning that it isolates nothing", logs.String())
	}
}

func TestWorkdirStaysInside(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	data := t.TempDir()
	p, _ := newProvider(t, data, nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "escape", Workdir: "../../../outside"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	want := filepath.Join(data, "sandboxes", "escape", "outside")
	if sb.Workdir != want {
		t.Errorf("Workdir = %s, want %s", sb.Workdir, want)
	}
	if _, err := p.Create(ctx, provider.Spec{Name: "escape"}); err == nil {
		t.Error("a second Create with the same name succeeded")
	}
}

// TestCheckSpecWorkdir: a workdir that names the sandbox's folder itself is refused before
// anything is made; one inside it (however written) is not.
func TestCheckSpecWorkdir(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, t.TempDir(), nil)
	for workdir, ok := range map[string]bool{"/": false, ".": false, "..": false, "/../..": false, "./": false,
		"": true, "work": true, "/src": true, "../../outside": true, "a/..//b": true} {
		if err := p.CheckSpec(provider.Spec{Name: "box", Workdir: workdir}); (err == nil) != ok {
			t.Errorf("CheckSpec(workdir %q) = %v, want ok=%v", workdir, err, ok)
		}
	}
}

// TestDeadDaemon: a daemon that dies leaves its sandbox failed, with a reason; Destroy still
// cleans up.
func TestDeadDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, _ := newProvider(t, t.TempDir(), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "dies", Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb.State != provider.StateRunning {
		t.Fatalf("Create: %s (%s), want running", sb.State, sb.Reason)
	}
	pid, _ := strconv.Atoi(sb.Data["pid"])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill daemon %d: %v", pid, err)
	}
	// Until the process is gone, Get may see a daemon that does not answer: wait for the
	// reason that says it is gone.
	waitState(t, p, sb, func(got provider.Sandbox) bool {
		return got.State == provider.StateFailed && strings.Contains(got.Reason, "no longer running")
	})
	if err := p.Destroy(ctx, sb); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := os.Stat(sb.ID); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("folder %s after Destroy: %v, want gone", sb.ID, err)
	}
}

// TestDaemonThatCannotStart: a daemon that exits at once comes back as a failed sandbox whose
// reason quotes its log.
func TestDaemonThatCannotStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'cannot listen: nope' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, _ := newProvider(t, t.TempDir(), func(c *Config) { c.EnvdBinary = bin })
	sb, err := p.Create(ctx, provider.Spec{Name: "broken", Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateFailed || !strings.Contains(sb.Reason, "cannot listen: nope") {
		t.Errorf("Create = %s (%q), want failed quoting the daemon's log", sb.State, sb.Reason)
	}
}

// TestCreateOverWhatWasLeft: a folder an earlier sandbox of the name left (one that failed) does
// not stop the name being made again; one whose daemon still runs is not touched.
func TestCreateOverWhatWasLeft(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	broken, _ := newProvider(t, data, func(c *Config) { c.EnvdBinary = bin })
	if sb, err := broken.Create(ctx, provider.Spec{Name: "again", Daemon: true}); err != nil || sb.State != provider.StateFailed {
		t.Fatalf("Create with a daemon that cannot start = %s, %v; want failed", sb.State, err)
	}
	p, logs := newProvider(t, data, nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "again", Daemon: true})
	if err != nil || sb.State != provider.StateRunning {
		t.Fatalf("Create over a failed sandbox's folder = %s (%s), %v; want running", sb.State, sb.Reason, err)
	}
	defer p.Destroy(ctx, sb)
	if !strings.Contains(logs.String(), "removing what an earlier local sandbox of this name left") {
		t.Errorf("the folder was replaced without a word in the log: %s", logs.String())
	}
	if _, err := p.Create(ctx, provider.Spec{Name: "again", Daemon: true}); err == nil || !strings.Contains(err.Error(), "did not fail") {
		t.Errorf("Create over a running sandbox's folder = %v, want refused", err)
	}
	if got, err := p.Get(ctx, sb); err != nil || got.State != provider.StateRunning {
		t.Errorf("the running sandbox after that = %s, %v; want running", got.State, err)
	}
}

// TestDaemonEnvironment: the daemon gets the base environment, the spec's and the token's hash,
// but nothing of the control plane's own, and not the token.
func TestDaemonEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	t.Setenv("HANGAR_SECRET_OF_CONTROL_PLANE", "leak")
	p, _ := newProvider(t, t.TempDir(), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "env", Daemon: true, Env: map[string]string{"FROM_SPEC": "yes"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if cmdline, _ := os.ReadFile("/proc/" + sb.Data["pid"] + "/cmdline"); strings.Contains(string(cmdline), sb.Daemon.AccessToken) {
		t.Errorf("the token is in the daemon's argv: %q", cmdline)
	}
	// The daemon is not dumpable: only a reader with CAP_SYS_PTRACE (root) sees its environment.
	b, err := os.ReadFile("/proc/" + sb.Data["pid"] + "/environ")
	if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
		t.Skip("SKIPPING the daemon's environment: it is not dumpable, and only root reads it")
	}
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(b), "\x00")
	for _, want := range []string{"FROM_SPEC=yes", "HOME=" + sb.ID, "HANGAR_ENVD_ACCESS_TOKEN_SHA256=" + provider.DaemonTokenSHA256(sb.Daemon.AccessToken)} {
		if !contains(env, want) {
			t.Errorf("daemon environment lacks %s: %q", want, env)
		}
	}
	if strings.Contains(string(b), "HANGAR_SECRET_OF_CONTROL_PLANE") || strings.Contains(string(b), sb.Daemon.AccessToken) {
		t.Errorf("daemon environment has the control plane's, or the token itself: %q", env)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitState polls Get until ok accepts the sandbox.
func waitState(t *testing.T, p provider.Provider, sb provider.Sandbox, ok func(provider.Sandbox) bool) provider.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		got, err := p.Get(ctx, sb)
		if err == nil && ok(got) {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sandbox %s: state %s (%s), %v; not what the test waits for", sb.Name, got.State, got.Reason, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPauseStopsDaemon: Pause stops the daemon's processes, Resume continues them.
func TestPauseStopsDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, _ := newProvider(t, t.TempDir(), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "frozen", Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	pid, _ := strconv.Atoi(sb.Data["pid"])
	state := func() byte {
		st, err := procStat(pid)
		if err != nil {
			t.Fatalf("stat daemon: %v", err)
		}
		return st.state
	}
	if _, err := p.Pause(ctx, sb); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if s := state(); s != 'T' {
		t.Errorf("daemon state after Pause %c, want T (stopped)", s)
	}
	if _, err := p.Exec(ctx, sb, provider.ExecRequest{Command: "true"}); err == nil {
		t.Error("Exec in a paused sandbox succeeded")
	}
	if _, err := p.Resume(ctx, sb); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if s := state(); s == 'T' {
		t.Errorf("daemon still stopped after Resume")
	}
}

// TestDestroyKillsWhatLeft: Destroy kills what a sandbox's commands left running outside its
// daemon's session — a process that setsid'd away (as a turn's harness does), one that ignores
// SIGTERM, one that left the folder but carries the provider's environment.
func TestDestroyKillsWhatLeft(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, _ := newProvider(t, t.TempDir(), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "leaver", Daemon: true})
	if err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(sb.Workdir, "pids")
	// setsid detaches from the daemon's session; the nohup'd one ignores SIGTERM and SIGHUP, and
	// runs in / with only the provider's environment to say where it came from.
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: `setsid sh -c 'trap "" TERM; sleep 600' </dev/null >/dev/null 2>&1 & echo $! >> pids
(cd / && nohup sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> ` + pids + `)`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start the leavers: %v %+v", err, res)
	}
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	var procs []int
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		procs = append(procs, pid)
	}
	if len(procs) != 2 {
		t.Fatalf("pids %q, want 2", data)
	}
	if err := p.Destroy(ctx, sb); err != nil {
		t.Fatal(err)
	}
	for _, pid := range procs {
		// Not this test's children: once killed, init reaps them.
		for !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			if st, err := procStat(pid); err == nil && st.state == 'Z' {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("process %d still runs after Destroy", pid)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}
