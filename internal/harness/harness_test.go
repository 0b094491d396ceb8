package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/harness"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/runlogtest"
)

// hangarBin is the hangar binary the tests run, built once in TestMain.
var hangarBin string

// testTimeout bounds each test's waits.
const testTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "harness-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // the split test's agent runs the fixture replay from here
	// A copy of its own, there: the shared one's folder is root's alone.
	hangarBin = filepath.Join(dir, "hangar-envd")
	if err := copyEnvd(hangarBin); err != nil {
		fmt.Fprintf(os.Stderr, "hangar-envd: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// copyEnvd copies the checkout's hangar-envd (providertest.SharedEnvd) to dst, executable by all.
func copyEnvd(dst string) error {
	src, err := providertest.SharedEnvd()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// replay is a command agent's prompt that prints a fixture log a line every 2 ms. It waits
// with bash's own read -t on a pipe nothing writes to (fd 9), not a sleep: a process per line
// was most of the test's CPU.
func replay(path string) string {
	return fmt.Sprintf(`exec 9<> <(:); while IFS= read -r l || [ -n "$l" ]; do printf '%%s\n' "$l"; read -t 0.002 -u 9 || :; done < %q`, path)
}

type turn struct {
	dir, runLog, statusFile string
}

func newTurn(t *testing.T) turn {
	dir := t.TempDir()
	return turn{dir: dir, runLog: filepath.Join(dir, "run.log"), statusFile: filepath.Join(dir, "status.json")}
}

// harnessCmd is `hangar harness` running prompt as a bash command agent.
func (tu turn) harnessCmd(ctx context.Context, prompt string, extra ...string) *exec.Cmd {
	args := append([]string{"harness", "--run-log", tu.runLog, "--status-file", tu.statusFile, "--prompt", prompt}, extra...)
	args = append(args, "--", "bash", "-c", harness.PromptArg)
	return exec.CommandContext(ctx, hangarBin, args...)
}

func (tu turn) status(t *testing.T) harness.Status {
	t.Helper()
	data, err := os.ReadFile(tu.statusFile)
	if err != nil {
		t.Fatalf("read status file: %v", err)
	}
	st, err := harness.ParseStatus(data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestReplayFixtures(t *testing.T) {
	t.Parallel()
	dir := runlogtest.Dir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) < 7 {
		t.Fatalf("found %d fixture logs in %s, want 7", len(files), dir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			tu := newTurn(t)
			if out, err := tu.harnessCmd(ctx, replay(f)).CombinedOutput(); err != nil {
				t.Fatalf("harness: %v\n%s", err, out)
			}
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(tu.runLog)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("run log (%d bytes, %v) differs from the fixture (%d bytes)", len(got), err, len(want))
			}
			st := tu.status(t)
			wantLines := bytes.Count(want, []byte("\n"))
			if st.ExitCode != 0 || st.Signal != "" || st.Error != "" || st.Summary.Lines != wantLines || st.Summary.Results < 1 ||
				st.EndedAt.Before(st.StartedAt) || st.DurationMS < 0 {
				t.Errorf("status = %+v; want exit 0 and a summary of %d lines with a result", st, wantLines)
			}
		})
	}
}

func TestAgentProcess(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		prompt string
		env    []string
		exit   int // the harness's exit code, mirroring the agent's
		check  func(t *testing.T, st harness.Status, log string)
	}{
		{"no_new_privs is set", `printf '{"nnp":"%s"}\n' "$(awk '/^NoNewPrivs/{print $2}' /proc/self/status)"`, nil, 0,
			func(t *testing.T, st harness.Status, log string) {
				if log != `{"nnp":"1"}`+"\n" {
					t.Errorf("agent saw %q, want no_new_privs 1", log)
				}
			}},
		{"env is passed", `printf '{"key":"%s"}\n' "$AGENT_API_KEY"`, []string{"AGENT_API_KEY=sk-123"}, 0,
			func(t *testing.T, st harness.Status, log string) {
				if log != `{"key":"sk-123"}`+"\n" {
					t.Errorf("agent saw %q, want its env", log)
				}
			}},
		{"exit code", `echo '{"type":"x"}'; exit 3`, nil, 3,
			func(t *testing.T, st harness.Status, log string) {
				if st.ExitCode != 3 || st.Signal != "" {
					t.Errorf("status = %+v, want exit 3", st)
				}
			}},
		{"signal", `kill -KILL $$`, nil, 128 + 9,
			func(t *testing.T, st harness.Status, log string) {
				if st.ExitCode != -1 || st.Signal != "SIGKILL" {
					t.Errorf("status = %+v, want SIGKILL", st)
				}
			}},
		{"last line without newline, and not JSON", `printf '{"a":1}\nplain text'`, nil, 0,
			func(t *testing.T, st harness.Status, log string) {
				if log != "{\"a\":1}\nplain text\n" || st.Summary.Lines != 2 || st.Summary.Invalid != 1 {
					t.Errorf("log %q, summary %+v; want 2 lines, 1 invalid", log, st.Summary)
				}
			}},
		{"line over 1 MiB", `head -c 1100000 /dev/zero | tr '\0' a; echo`, nil, 0,
			func(t *testing.T, st harness.Status, log string) {
				if len(log) != 1100001 || st.Summary.Lines != 1 || st.Summary.Truncated != 1 {
					t.Errorf("log %d bytes, summary %+v; want the whole line kept, counted truncated", len(log), st.Summary)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			tu := newTurn(t)
			cmd := tu.harnessCmd(ctx, c.prompt)
			cmd.Env = append(os.Environ(), c.env...)
			err := cmd.Run()
			var exitErr *exec.ExitError
			if code := 0; errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
				if code != c.exit {
					t.Errorf("harness exit code %d, want %d", code, c.exit)
				}
			} else if err != nil || c.exit != 0 {
				t.Fatalf("harness: %v, want exit %d", err, c.exit)
			}
			log, _ := os.ReadFile(tu.runLog)
			c.check(t, tu.status(t), string(log))
		})
	}
}

// waitFor polls cond until it holds or the test's deadline passes.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// newGate makes a FIFO at dir/gate, which an agent waits on with `read x < gate` (a loop
// testing for a file forks a sleep per turn), and returns its path and the function that opens
// the gate: it writes the line one reader reads. The test holds the FIFO open (O_RDWR: opening
// never blocks) until it ends, so the line waits there for a reader that opens it later.
func newGate(t *testing.T, dir string) (string, func()) {
	t.Helper()
	path := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, func() {
		if _, err := f.WriteString("open\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSurvivesParent kills the harness's starter (a shell, with its whole process group) while
// the agent runs: the turn carries on to its end and writes its status.
func TestSurvivesParent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	gate, open := newGate(t, tu.dir)
	prompt := fmt.Sprintf(`echo '{"type":"started"}'; read x < %q; echo '{"type":"done"}'`, gate)
	h := tu.harnessCmd(ctx, prompt)
	parent := exec.CommandContext(ctx, "bash", "-c", `"$@" & wait`, "bash")
	parent.Args = append(parent.Args, h.Args...)
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the agent to start", func() bool { b, _ := os.ReadFile(tu.runLog); return len(b) > 0 })
	syscall.Kill(-parent.Process.Pid, syscall.SIGKILL)
	parent.Wait()
	open()
	waitFor(t, ctx, "the status file", func() bool { return exists(tu.statusFile) })
	if st := tu.status(t); st.ExitCode != 0 || st.Summary.Lines != 2 {
		t.Errorf("status after the parent died = %+v, want exit 0 after 2 lines", st)
	}
}

// TestCancel sends SIGTERM to the harness's process group, as a turn's cancel does: the agent
// and everything it started go, and the status says so.
func TestCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	// The agent's child ignores SIGTERM and holds the agent's output open.
	h := tu.harnessCmd(ctx, `bash -c 'trap "" TERM; sleep 600' & printf '{"pgid":%d}\n' $$; wait`)
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	var agent struct{ PGID int }
	waitFor(t, ctx, "the agent's pid", func() bool { b, _ := os.ReadFile(tu.runLog); return json.Unmarshal(b, &agent) == nil })
	// The harness left its starter's session: its process group is its own pid.
	if pgid, err := syscall.Getpgid(h.Process.Pid); err != nil || pgid != h.Process.Pid {
		t.Fatalf("harness pgid = %d, %v; want its pid %d", pgid, err, h.Process.Pid)
	}
	syscall.Kill(-h.Process.Pid, syscall.SIGTERM)
	err := h.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 128+15 {
		t.Errorf("harness ended with %v, want exit 143", err)
	}
	if st := tu.status(t); st.Signal != "SIGTERM" {
		t.Errorf("status = %+v, want SIGTERM", st)
	}
	// SIGKILL went to the group before the harness ended; wait for the kernel to finish them.
	waitFor(t, ctx, "the agent's process group to be gone", func() bool { return len(liveInGroup(agent.PGID)) == 0 })
}

// liveInGroup lists the processes of a process group that are not zombies.
func liveInGroup(pgid int) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var live []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			live = append(live, p)
		}
	}
	return live
}

// TestSplitAgentCannotWriteStatus runs the agent as nobody with the run log and status file in
// a root-owned directory: its attempts to overwrite, replace or remove them fail, and the status
// is the harness's.
func TestSplitAgentCannotWriteStatus(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: the split test must run")
		}
		t.Skip("SKIPPING: the split test needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// A root-owned directory the agent can reach (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "harness-split-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	tu := turn{dir: dir, runLog: filepath.Join(dir, "run.log"), statusFile: filepath.Join(dir, "status.json")}
	os.WriteFile(tu.statusFile, []byte(`{"exit_code":0,"summary":{"result":"old"}}`), 0o644)
	attack := fmt.Sprintf(`cd %[1]q
try() { if eval "$1" 2>/dev/null; then r=ok; else r=refused; fi; printf '{"try":"%%s","got":"%%s"}\n' "$1" "$r"; }
try 'echo "{\"exit_code\":0}" > status.json'
try 'echo forged >> run.log'
try 'echo x > status.tmp && mv status.tmp status.json'
try 'rm -f status.json'
try 'ln -sf /dev/null status.json'
printf '{"type":"result","subtype":"success","is_error":false,"result":"all good"}\n'
exit 7`, tu.dir)
	var out []byte
	out, err = tu.harnessCmd(ctx, attack, "--split-uid", "65534", "--split-gid", "65534", "--dir", "/").CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
		t.Fatalf("harness: %v, want exit 7\n%s", err, out)
	}
	log, _ := os.ReadFile(tu.runLog)
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var r struct{ Try, Got string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Try != "" && r.Got != "refused" {
			t.Errorf("the agent's %q: %s, want refused", r.Try, r.Got)
		}
	}
	if strings.Contains(string(log), "\nforged\n") {
		t.Error("the agent wrote into the run log")
	}
	st := tu.status(t)
	if st.ExitCode != 7 || st.Summary.Lines != 6 || st.Summary.Result != "all good" {
		t.Errorf("status = %+v, want the harness's: exit 7 after 6 lines", st)
	}
	if fi, err := os.Stat(tu.statusFile); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("status file owner: %v", err)
	}
}

// TestLeftoverHoldingOutput: the agent exits, leaving behind a process that holds its output
// open. The turn still ends (after harness.KillGrace), with the leftover killed.
func TestLeftoverHoldingOutput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	out, err := tu.harnessCmd(ctx, `sleep 600 & printf '{"pgid":%d}\n' $$`).CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	var agent struct{ PGID int }
	b, _ := os.ReadFile(tu.runLog)
	if err := json.Unmarshal(b, &agent); err != nil {
		t.Fatalf("run log %q: %v", b, err)
	}
	if st := tu.status(t); st.ExitCode != 0 || st.Summary.Lines != 1 {
		t.Errorf("status = %+v, want exit 0 after 1 line", st)
	}
	waitFor(t, ctx, "the leftover to be gone", func() bool { return len(liveInGroup(agent.PGID)) == 0 })
}

// TestOrphansReapedDuringTurn: orphans of the agent that exit while it runs are reaped then,
// not at the turn's end (as zombies they would hold the sandbox's pids), and the agent's own
// exit code is still the turn's.
func TestOrphansReapedDuringTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	// The agent blocks reading the fifo until the test closes its end, the only writer.
	fifo := filepath.Join(tu.dir, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	gate, err := os.OpenFile(fifo, os.O_RDWR, 0) // O_RDWR: opening never blocks
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	// 50 orphans that exit at once (cat ends when the last of them has: each held its stdout),
	// and one that lives until the gate opens.
	prompt := fmt.Sprintf(`for i in $(seq 50); do (sh -c 'exit 0' &); done | cat
(sh -c 'read x < %[1]q' &)
printf '{"agent":%%d}\n' $$
read x < %[1]q
exit 7`, fifo)
	h := tu.harnessCmd(ctx, prompt)
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	var agent struct{ Agent int }
	waitFor(t, ctx, "the agent's orphans to exit", func() bool { b, _ := os.ReadFile(tu.runLog); return json.Unmarshal(b, &agent) == nil })
	waitFor(t, ctx, "the orphans to be reaped while the agent runs", func() bool {
		live, zombies := children(h.Process.Pid)
		return len(zombies) == 0 && len(live) == 2 && slices.Contains(live, agent.Agent)
	})
	gate.Close()
	var exitErr *exec.ExitError
	if err := h.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
		t.Errorf("harness ended with %v, want exit 7", err)
	}
	if st := tu.status(t); st.ExitCode != 7 || st.Signal != "" {
		t.Errorf("status = %+v, want exit 7", st)
	}
}

// children lists the children of pid that live and those that are zombies.
func children(pid int) (live, zombies []int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if f[0] == "Z" {
			zombies = append(zombies, child)
		} else {
			live = append(live, child)
		}
	}
	return live, zombies
}

// TestDetach: `hangar harness --detach` prints the turn's pid and returns while the turn runs
// on in its own session (pid = its process group).
func TestDetach(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	gate, open := newGate(t, tu.dir)
	h := tu.harnessCmd(ctx, fmt.Sprintf(`echo '{"type":"started"}'; read x < %q`, gate), "--detach")
	out, err := h.Output()
	if err != nil {
		t.Fatalf("harness --detach: %v", err)
	}
	var pid int
	var start uint64
	if n, _ := fmt.Sscan(string(out), &pid, &start); n != 2 {
		t.Fatalf("harness --detach printed %q, want a pid and a start time", out)
	}
	if got, err := harness.ProcStart(pid); err != nil || got != start {
		t.Errorf("the turn's start time = %d, %v; --detach printed %d", got, err, start)
	}
	if exists(tu.statusFile) {
		t.Fatal("status file written before the agent ended")
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("detached harness pgid = %d, %v; want its pid %d", pgid, err, pid)
	}
	open()
	waitFor(t, ctx, "the status file", func() bool { return exists(tu.statusFile) })
	if st := tu.status(t); st.ExitCode != 0 || st.Summary.Lines != 1 {
		t.Errorf("status = %+v", st)
	}
}

// TestSplitRefusesAgentsDirectory: a split turn whose run log and status file would live where
// the agent's uid can write (a directory it owns, say one it made in /tmp before hangar did, or
// one writable by all) does not start: the agent never runs and nothing is written there, so
// no status file the agent placed in advance is ever taken for the turn's.
func TestSplitRefusesAgentsDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: the split test must run")
		}
		t.Skip("SKIPPING: the split test needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, c := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"the agent's own", func(dir string) error { return os.Chown(dir, 65534, 65534) }, "belongs to the agent's uid 65534"},
		{"writable by all", func(dir string) error { return os.Chmod(dir, 0o777) }, "writable by group or others"},
		{"writable by all, sticky", func(dir string) error { return os.Chmod(dir, 0o1777) }, "writable by group or others"},
		{"below one of the agent's", func(dir string) error { return os.Chown(filepath.Dir(dir), 65534, 65534) }, "belongs to the agent's uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, err := os.MkdirTemp("", "harness-split-*")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(parent) })
			os.Chmod(parent, 0o755)
			dir := filepath.Join(parent, "turn")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			tu := turn{dir: dir, runLog: filepath.Join(dir, "run.log"), statusFile: filepath.Join(dir, "status.json")}
			ran := filepath.Join(parent, "ran")
			for _, extra := range [][]string{nil, {"--detach"}} {
				args := append([]string{"--split-uid", "65534", "--split-gid", "65534", "--dir", "/"}, extra...)
				out, err := tu.harnessCmd(ctx, "touch "+ran, args...).CombinedOutput()
				if err == nil || !strings.Contains(string(out), c.want) {
					t.Errorf("harness %v = %v %s; want refused: %s", extra, err, out, c.want)
				}
				if exists(tu.statusFile) || exists(tu.runLog) || exists(ran) {
					t.Errorf("harness %v: something ran or was written in the agent's directory", extra)
				}
			}
		})
	}
}

// leftovers is an agent's prompt that starts a process each way one leaves its parent's reach
// — setsid'd, double-forked, nohup'd, and one that ignores SIGTERM in a session of its own —
// each a sleep whose argv[0] is marker, waits until all four run (pausing with bash's read -t
// on a pipe nothing writes to, not a sleep process per turn), and prints a line. Then it
// exits (stay false) or waits for a cancel.
func leftovers(dir, marker string, stay bool) string {
	run := func(n int, pre string) string {
		return fmt.Sprintf(`%s touch %q; exec -a %s sleep 600`, pre, filepath.Join(dir, fmt.Sprintf("up%d", n)), marker)
	}
	s := fmt.Sprintf(`setsid bash -c %[1]q &
( ( bash -c %[2]q & ) & )
nohup bash -c %[3]q >/dev/null 2>&1 &
setsid bash -c %[4]q &
exec 9<> <(:)
for i in 1 2 3 4; do while [ ! -e %[5]q/up$i ]; do read -t 0.01 -u 9 || :; done; done
echo '{"type":"started"}'
`, run(1, ""), run(2, "setsid"), run(3, ""), run(4, `trap "" TERM;`), dir)
	if stay {
		s += "sleep 600 & wait\n"
	}
	return s
}

// running lists the live processes whose argv[0] is marker (a zombie's cmdline is empty).
func running(marker string) []string {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var live []string
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(b, []byte(marker+"\x00")) {
			live = append(live, p)
		}
	}
	return live
}

// TestNothingOutlivesTheTurn: whatever the agent started — setsid'd, double-forked, nohup'd,
// ignoring SIGTERM — is gone by the time the harness has written its status file, whether the
// agent exited or the turn was cancelled; the run log still has every line and the status
// file is written after.
func TestNothingOutlivesTheTurn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cancel bool
		split  bool
	}{
		{"agent exits", false, false},
		{"cancel", true, false},
		{"split, agent exits", false, true},
		{"split, cancel", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			tu := newTurn(t)
			var extra []string
			if c.split {
				if os.Geteuid() != 0 {
					if os.Getenv("CI") == "true" {
						t.Fatal("CI runs as root: the split test must run")
					}
					t.Skip("SKIPPING: the split test needs root")
				}
				dir, err := os.MkdirTemp("", "harness-split-*")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				os.Chmod(dir, 0o755)
				tu = turn{dir: dir, runLog: filepath.Join(dir, "run.log"), statusFile: filepath.Join(dir, "status.json")}
				extra = []string{"--split-uid", "65534", "--split-gid", "65534", "--dir", "/"}
			}
			// The agent's marks go where it can write.
			marks, err := os.MkdirTemp("", "harness-marks-*")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(marks) })
			os.Chmod(marks, 0o777)
			marker := "hangar-leftover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			t.Cleanup(func() { // a failed run leaves none behind either
				for _, p := range running(marker) {
					if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			h := tu.harnessCmd(ctx, leftovers(marks, marker, c.cancel), extra...)
			var stderr bytes.Buffer
			h.Stderr = &stderr
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			if c.cancel {
				waitFor(t, ctx, "the agent's processes to start", func() bool { b, _ := os.ReadFile(tu.runLog); return len(b) > 0 })
				// Each touched its file just before its exec as marker: wait for the exec.
				waitFor(t, ctx, "the agent's 4 processes to run as "+marker, func() bool { return len(running(marker)) == 4 })
				syscall.Kill(-h.Process.Pid, syscall.SIGTERM)
			}
			err = h.Wait()
			left := running(marker) // before anything else: the harness has ended
			if c.cancel {
				var exitErr *exec.ExitError
				if !errors.As(err, &exitErr) || exitErr.ExitCode() != 128+15 {
					t.Errorf("harness ended with %v, want exit 143\n%s", err, stderr.String())
				}
			} else if err != nil {
				t.Fatalf("harness: %v\n%s", err, stderr.String())
			}
			if len(left) > 0 {
				t.Errorf("the agent's processes outlived the turn: %v", left)
			}
			if log, _ := os.ReadFile(tu.runLog); string(log) != `{"type":"started"}`+"\n" {
				t.Errorf("run log %q, want the agent's line", log)
			}
			st := tu.status(t)
			if st.Summary.Lines != 1 || (c.cancel && st.Signal != "SIGTERM") || (!c.cancel && st.ExitCode != 0) {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

// TestStderrTail: the end of the agent's stderr is in the status file, whole lines of it, and
// still goes to the harness's stderr.
func TestStderrTail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tu := newTurn(t)
	// 10,000 numbered lines, then Codex's sentence: only the last ~4 KiB are kept.
	// (seq, not a loop of echo: one process writing 4 KiB blocks that cut lines anywhere, not
	// 10,000 writes for the harness to read one by one.)
	prompt := `seq -f "noise %g" 10000 >&2
echo "Not inside a trusted directory and --skip-git-repo-check was not specified." >&2
exit 1`
	h := tu.harnessCmd(ctx, prompt)
	var stderr bytes.Buffer
	h.Stderr = &stderr
	var exitErr *exec.ExitError
	if err := h.Run(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("harness: %v, want exit 1", err)
	}
	st := tu.status(t)
	want := "Not inside a trusted directory and --skip-git-repo-check was not specified."
	if !strings.HasSuffix(st.StderrTail, "\n"+want) || len(st.StderrTail) > harness.StderrTailBytes ||
		len(st.StderrTail) < harness.StderrTailBytes-100 || !strings.HasPrefix(st.StderrTail, "noise ") {
		t.Errorf("stderr tail (%d bytes) = %.60q ... %.100q; want whole lines up to Codex's", len(st.StderrTail), st.StderrTail, st.StderrTail[max(0, len(st.StderrTail)-100):])
	}
	if !strings.Contains(stderr.String(), "noise 1\nnoise 2\n") || !strings.Contains(stderr.String(), want) {
		t.Errorf("the harness's stderr lacks the agent's (%d bytes)", stderr.Len())
	}
}
