package envd_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// TestOutputIsExact checks that every byte arrives, in order, on the right stream: random bytes
// (invalid UTF-8 included), three times the starter's queue and about a hundred read chunks,
// through stdout and through stderr, over TCP and a unix socket, with both codecs. (Every byte
// costs CPU several times over under -race: more proves no more.)
func TestOutputIsExact(t *testing.T) {
	t.Parallel()
	payload := make([]byte, 3*daemon.DefaultStarterQueueBytes+17)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	copy(payload, []byte{0xff, 0xfe, 0x00, 0xc3, 0x28}) // invalid UTF-8 and a NUL up front
	file := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(file, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		n    network
		json bool
	}{{tcp, false}, {unix, false}, {tcp, true}}
	for _, tc := range cases {
		n, json := tc.n, tc.json
		t.Run(fmt.Sprintf("%s/json=%v", n, json), func(t *testing.T) {
			t.Parallel()
			td := startDaemon(t, n, daemon.Config{})
			c := newClient(t, td, envd.Config{JSON: json})
			ctx := testCtx(t, longWait)

			r := run(t, ctx, c, envd.StartRequest{Cmd: "cat", Args: []string{file}})
			if !bytes.Equal(r.stdout, payload) {
				t.Errorf("stdout: got %d bytes, want the %d bytes of the file (equal prefix %d)", len(r.stdout), len(payload), commonPrefix(r.stdout, payload))
			}
			if len(r.stderr) != 0 {
				t.Errorf("stderr: got %q, want nothing", r.stderr)
			}
			if r.exit.Code != 0 || !r.exit.Exited {
				t.Errorf("exit: got %+v, want code 0", r.exit)
			}

			r = run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `cat "$1" >&2`, "sh", file}})
			if !bytes.Equal(r.stderr, payload) {
				t.Errorf("stderr: got %d bytes, want the %d bytes of the file", len(r.stderr), len(payload))
			}
			if len(r.stdout) != 0 {
				t.Errorf("stdout: got %d bytes, want nothing", len(r.stdout))
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestStdoutAndStderrApart checks the two streams are kept apart and each keeps its order.
func TestStdoutAndStderrApart(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	script := `for i in 1 2 3 4 5; do printf "out$i "; printf "err$i " >&2; done`
	r := run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", script}})
	if got, want := string(r.stdout), "out1 out2 out3 out4 out5 "; got != want {
		t.Errorf("stdout: got %q, want %q", got, want)
	}
	if got, want := string(r.stderr), "err1 err2 err3 err4 err5 "; got != want {
		t.Errorf("stderr: got %q, want %q", got, want)
	}
}

// TestEnvAndCwd checks envs, cwd and the default working directory.
func TestEnvAndCwd(t *testing.T) {
	t.Parallel()
	workdir := t.TempDir()
	other := t.TempDir()
	td := startDaemon(t, tcp, daemon.Config{Workdir: workdir})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)

	r := run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `printf "%s|%s" "$GREETING" "$PWD"`}, Envs: map[string]string{"GREETING": "hello world"}})
	if got, want := string(r.stdout), "hello world|"+workdir; got != want {
		t.Errorf("default cwd: got %q, want %q", got, want)
	}
	r = run(t, ctx, c, envd.StartRequest{Cmd: "pwd", Cwd: other})
	if got, want := strings.TrimSpace(string(r.stdout)), other; got != want {
		t.Errorf("cwd: got %q, want %q", got, want)
	}
}

// TestExitStatus covers exit codes and deaths by signal.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	cases := []struct {
		name   string
		script string
		want   envd.Exit
	}{
		{"zero", "exit 0", envd.Exit{Code: 0, Exited: true, Status: "exit status 0"}},
		{"three", "exit 3", envd.Exit{Code: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}},
		{"sigkill", "kill -KILL $$", envd.Exit{Code: -1, Exited: false, Status: "signal: killed", Error: "signal: killed"}},
		{"sigterm", "kill -TERM $$", envd.Exit{Code: -1, Exited: false, Status: "signal: terminated", Error: "signal: terminated"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", tc.script}})
			if *r.exit != tc.want {
				t.Errorf("got %+v, want %+v", *r.exit, tc.want)
			}
		})
	}
}

// TestStartErrors checks bad requests get the right typed errors.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	cases := []struct {
		name string
		req  envd.StartRequest
		want error
	}{
		{"missing cwd", envd.StartRequest{Cmd: "true", Cwd: "/no/such/dir"}, envd.ErrInvalidArgument},
		{"unknown program", envd.StartRequest{Cmd: "no-such-program-hangar"}, envd.ErrInvalidArgument},
		{"no program", envd.StartRequest{}, envd.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Start(ctx, tc.req)
			if err == nil {
				s.Close()
				t.Fatal("start succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var e *envd.Error
			if !errors.As(err, &e) || e.Message == "" {
				t.Fatalf("want an *envd.Error with a message, got %#v", err)
			}
		})
	}
	if _, err := c.Connect(ctx, envd.ByPID(999999)); !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("connect to an unknown pid: got %v, want ErrNotFound", err)
	}
	if _, err := c.Connect(ctx, envd.ByTag("nope")); !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("connect to an unknown tag: got %v, want ErrNotFound", err)
	}
	if err := c.Signal(ctx, envd.ByPID(999999), envd.SIGTERM); !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("signal an unknown pid: got %v, want ErrNotFound", err)
	}
	if err := c.SendInput(ctx, envd.ByTag("nope"), []byte("x")); !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("input to an unknown tag: got %v, want ErrNotFound", err)
	}
	in, err := c.StreamInput(ctx, envd.ByPID(999999), false)
	if err == nil {
		_, err = in.Write([]byte("x"))
		if err == nil {
			err = in.Close()
		}
	}
	if !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("stream input to an unknown pid: got %v, want ErrNotFound", err)
	}
}

// TestStdin covers SendInput, CloseStdin, StreamInput and stdin off.
func TestStdin(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)

	s, err := c.Start(ctx, envd.StartRequest{Cmd: "cat", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sel := envd.ByPID(s.PID())
	if err := c.SendInput(ctx, sel, []byte("hello ")); err != nil {
		t.Fatal(err)
	}
	in, err := c.StreamInput(ctx, sel, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"str", "eam", "ed\x00\xff"} {
		if _, err := in.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseStdin(ctx, sel); err != nil {
		t.Fatal(err)
	}
	r := collect(t, s)
	if got, want := string(r.stdout), "hello streamed\x00\xff"; got != want {
		t.Errorf("stdout: got %q, want %q", got, want)
	}
	if r.exit.Code != 0 {
		t.Errorf("exit: %+v", r.exit)
	}

	// Without stdin the process reads end of file at once, and input is refused.
	r = run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "cat; echo eof"}})
	if got := string(r.stdout); got != "eof\n" {
		t.Errorf("stdout without stdin: got %q", got)
	}
	s, err = c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := c.SendInput(ctx, envd.ByPID(s.PID()), []byte("x")); !errors.Is(err, envd.ErrFailedPrecondition) {
		t.Errorf("input without stdin: got %v, want ErrFailedPrecondition", err)
	}
	if err := c.Signal(ctx, envd.ByPID(s.PID()), envd.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s); r.exit.Exited {
		t.Errorf("killed sleep: %+v", r.exit)
	}
}

// TestPTY runs a shell on a pty, reads its size, resizes it and reads it again.
func TestPTY(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)

	s, err := c.Start(ctx, envd.StartRequest{
		Cmd:  "sh",
		Args: []string{"-c", `stty size; [ -t 0 ] && echo tty; read x; stty size; echo "got $x"`},
		PTY:  &envd.PTYSize{Cols: 80, Rows: 24},
		Tag:  "term",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []byte
	next := func(want string) {
		t.Helper()
		for !strings.Contains(string(out), want) {
			ev, err := s.Next()
			if err != nil {
				t.Fatalf("waiting for %q in %q: %v", want, out, err)
			}
			if ev.Kind == envd.EventStdout || ev.Kind == envd.EventStderr {
				t.Fatalf("a pty process sent %v", ev.Kind)
			}
			out = append(out, ev.Data...)
		}
	}
	next("24 80")
	next("tty")
	if err := c.CloseStdin(ctx, envd.ByTag("term")); !errors.Is(err, envd.ErrFailedPrecondition) {
		t.Errorf("close stdin of a pty process: got %v, want ErrFailedPrecondition", err)
	}
	if err := c.ResizePTY(ctx, envd.ByTag("term"), envd.PTYSize{Cols: 100, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendPTYInput(ctx, envd.ByTag("term"), []byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	next("40 100")
	next("got typed")
	r := collect(t, s)
	if r.exit.Code != 0 {
		t.Errorf("exit: %+v", r.exit)
	}

	s2, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"30"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := c.ResizePTY(ctx, envd.ByPID(s2.PID()), envd.PTYSize{Cols: 10, Rows: 10}); !errors.Is(err, envd.ErrFailedPrecondition) {
		t.Errorf("resize without a pty: got %v, want ErrFailedPrecondition", err)
	}
	_ = c.Signal(ctx, envd.ByPID(s2.PID()), envd.SIGKILL)
	collect(t, s2)
}

// TestConnect attaches to a running process by tag, sees output from then on and its end,
// and checks that a process that just ended answers start then end.
func TestConnect(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, unix, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)

	s, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `echo before; read x; echo "after $x"; exit 7`}, Stdin: true, Tag: "job"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Next()
	if err != nil || string(ev.Data) != "before\n" {
		t.Fatalf("first output: %v %q", err, ev.Data)
	}
	// Closing the Start stream does not kill the process.
	s.Close()

	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].PID != s.PID() || list[0].Tag != "job" || list[0].Cmd != "sh" {
		t.Fatalf("list: got %+v", list)
	}

	a, err := c.Connect(ctx, envd.ByTag("job"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.PID() != s.PID() {
		t.Errorf("connect: pid %d, want %d", a.PID(), s.PID())
	}
	if err := c.SendInput(ctx, envd.ByTag("job"), []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	r := collect(t, a)
	if got := string(r.stdout); got != "after x\n" {
		t.Errorf("connected output: got %q, want only what came after connecting", got)
	}
	if r.exit.Code != 7 {
		t.Errorf("exit: %+v", r.exit)
	}

	// Ended: still answers, at once.
	for _, sel := range []envd.Selector{envd.ByPID(s.PID()), envd.ByTag("job")} {
		late, err := c.Connect(ctx, sel)
		if err != nil {
			t.Fatalf("connect to an ended process by %v: %v", sel, err)
		}
		r := collect(t, late)
		late.Close()
		if late.PID() != s.PID() || r.exit.Code != 7 || len(r.stdout) != 0 {
			t.Errorf("late connect by %v: pid %d, %+v", sel, late.PID(), r)
		}
	}
	if list, _ := c.List(ctx); len(list) != 0 {
		t.Errorf("list after the end: %+v", list)
	}
}

// TestKeepalive checks a silent stream gets keepalive events at the requested interval: each
// time the daemon's clock passes it (a mock here), one more.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	made, reset := clock.Trap().NewTimer("daemon", "keepalive"), clock.Trap().TimerReset("daemon", "keepalive")
	defer made.Close()
	td := startDaemon(t, tcp, daemon.Config{Clock: clock})
	c := newClient(t, td, envd.Config{KeepaliveInterval: time.Second})
	ctx := testCtx(t, shortWait)
	// Start returns once the stream is under way, after the daemon made its keepalive timer.
	started := make(chan error, 1)
	var s *envd.ProcessStream
	go func() {
		var err error
		s, err = c.Start(ctx, envd.StartRequest{Cmd: "cat", Stdin: true})
		started <- err
	}()
	made.MustWait(ctx).MustRelease(ctx)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		// The timer is set again after what was sent: the start event, then each keepalive.
		reset.MustWait(ctx).MustRelease(ctx)
		clock.Advance(time.Second).MustWait(ctx)
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != envd.EventKeepalive {
			t.Fatalf("got %v, want keepalive", ev.Kind)
		}
	}
	reset.MustWait(ctx).MustRelease(ctx) // after the second keepalive
	reset.Close()
	if err := c.CloseStdin(ctx, envd.ByPID(s.PID())); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s); r.exit.Code != 0 {
		t.Errorf("exit: %+v", r.exit)
	}
}

// TestLifetime checks Connect-Timeout-Ms kills the process and, as on E2B's envd, the Start
// stream ends with ErrDeadlineExceeded after the output; an attached stream gets the end.
func TestLifetime(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "echo started; sleep 60"}, Lifetime: 300e6})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := c.Connect(ctx, envd.ByPID(s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var stdout []byte
	for {
		ev, err := s.Next()
		if err != nil {
			if !errors.Is(err, envd.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "lifetime") {
				t.Errorf("start stream ended with %v, want deadline exceeded for the lifetime", err)
			}
			break
		}
		if ev.Kind == envd.EventEnd {
			t.Fatalf("start stream: end event %+v, want deadline exceeded", ev.Exit)
		}
		stdout = append(stdout, ev.Data...)
	}
	if string(stdout) != "started\n" {
		t.Errorf("stdout: %q", stdout)
	}
	if r := collect(t, a); r.exit.Exited || r.exit.Code != -1 || r.exit.Status != "signal: killed" || !strings.Contains(r.exit.Error, "lifetime") {
		t.Errorf("attached: got %+v, want killed for its lifetime", r.exit)
	}
}

// TestGroupKill checks a signal reaches the whole process group: a child that would outlive
// its parent dies with it.
func TestGroupKill(t *testing.T) {
	t.Parallel()
	for _, sig := range []envd.Signal{envd.SIGTERM, envd.SIGKILL} {
		t.Run(strconv.Itoa(int(sig)), func(t *testing.T) {
			t.Parallel()
			td := startDaemon(t, tcp, daemon.Config{})
			c := newClient(t, td, envd.Config{})
			ctx := testCtx(t, shortWait)
			s, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `sleep 300 & echo $!; wait`}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ev, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(string(ev.Data)))
			if err != nil {
				t.Fatalf("child pid: %q", ev.Data)
			}
			if !alive(child) {
				t.Fatalf("child %d is not running", child)
			}
			if err := c.Signal(ctx, envd.ByPID(s.PID()), sig); err != nil {
				t.Fatal(err)
			}
			r := collect(t, s)
			if r.exit.Exited {
				t.Errorf("exit: %+v, want killed", r.exit)
			}
			eventually(t, shortWait, fmt.Sprintf("child %d still runs", child), func() bool { return !alive(child) })
		})
	}
}

// alive reports whether pid runs (a zombie waiting for its reaper does not count).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestSlowSubscriber checks an attached subscriber that does not read neither stalls the
// process nor loses output silently: the process ends, and the slow stream ends with
// ErrSlowSubscriber.
func TestSlowSubscriber(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{SubscriberQueueBytes: 256 << 10})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, longWait)
	// Four times what the slow stream can hold unread: its queue (256 KiB) and HTTP/2's window
	// for a stream (the client's default, 4 MiB). (Every byte costs CPU twice over under -race.)
	const total = 16 << 20
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "read go; head -c " + strconv.Itoa(total) + " /dev/zero"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slow, err := c.Connect(ctx, envd.ByPID(s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := c.SendInput(ctx, envd.ByPID(s.PID()), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	// The starter reads everything; nobody reads slow while the process runs.
	if r := collect(t, s); r.exit.Code != 0 || len(r.stdout) != total {
		t.Fatalf("the starter got %d of %d bytes, exit %+v", len(r.stdout), total, r.exit)
	}
	got := 0
	for {
		ev, err := slow.Next()
		if err != nil {
			if !errors.Is(err, envd.ErrSlowSubscriber) {
				t.Fatalf("after %d bytes: got %v, want ErrSlowSubscriber", got, err)
			}
			break
		}
		if ev.Kind == envd.EventEnd {
			t.Fatalf("the slow stream got the end after %d of %d bytes", got, total)
		}
		got += len(ev.Data)
	}
	if got >= total {
		t.Errorf("the slow stream got all %d bytes", got)
	}
}

// TestStarterSlowsProcess checks the starter is the process's terminal: one that reads slower
// than the process prints slows the process down and gets every byte.
func TestStarterSlowsProcess(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{SubscriberQueueBytes: 64 << 10})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, longWait)
	const total = 4 << 20 // 64 times the queue
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "head", Args: []string{"-c", strconv.Itoa(total), "/dev/urandom"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, reads := 0, 0
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		if ev.Kind == envd.EventEnd {
			if ev.Exit.Code != 0 {
				t.Errorf("exit %+v", ev.Exit)
			}
			break
		}
		got += len(ev.Data)
		if reads++; reads%16 == 0 {
			time.Sleep(time.Millisecond) // a slow reader
		}
	}
	if got != total {
		t.Fatalf("the starter got %d of %d bytes", got, total)
	}
}

// TestStalledStarter checks a starter that takes nothing for StarterStall is ended, and the
// process then runs to its end.
func TestStalledStarter(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{SubscriberQueueBytes: 64 << 10, StarterStall: 200 * time.Millisecond})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, longWait)
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "head", Args: []string{"-c", strconv.Itoa(16 << 20), "/dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventually(t, longWait, "the process is still listed", func() bool {
		list, err := c.List(ctx)
		return err == nil && len(list) == 0
	})
	for {
		ev, err := s.Next()
		if err != nil {
			if !errors.Is(err, envd.ErrSlowSubscriber) {
				t.Fatalf("got %v, want ErrSlowSubscriber", err)
			}
			return
		}
		if ev.Kind == envd.EventEnd {
			t.Fatal("a stalled starter got the end")
		}
	}
}

// TestKillGrace checks a killed process's stream ends even when a descendant that left the
// process group (setsid) still holds its stdout.
func TestKillGrace(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{KillGrace: 200e6})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "sh", Args: []string{"-c", `setsid sh -c 'echo $$; exec sleep 300' & sleep 300`}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	escaped, err := strconv.Atoi(strings.TrimSpace(string(ev.Data)))
	if err != nil {
		t.Fatalf("escaped pid: %q", ev.Data)
	}
	defer syscall.Kill(escaped, syscall.SIGKILL)
	if err := c.Signal(ctx, envd.ByPID(s.PID()), envd.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, s); r.exit.Exited || r.exit.Status != "signal: killed" {
		t.Errorf("exit: %+v", r.exit)
	}
	if !alive(escaped) {
		t.Errorf("the escaped process %d died with the group; the test proves nothing", escaped)
	}
}

// TestTagsAreUnique checks a running process's tag cannot be given to another process (hangar
// finds its background processes by tag), and is free again once the process ended.
func TestTagsAreUnique(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, longWait)
	first, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: "hangar:p_1:abc"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: "hangar:p_1:abc"}); !errors.Is(err, envd.ErrAlreadyExists) {
		t.Fatalf("a second process with the same tag: %v, want ErrAlreadyExists", err)
	}
	if err := c.Signal(ctx, envd.ByTag("hangar:p_1:abc"), envd.SIGKILL); err != nil {
		t.Fatal(err)
	}
	collect(t, first)
	again, err := c.Start(ctx, envd.StartRequest{Cmd: "true", Tag: "hangar:p_1:abc"})
	if err != nil {
		t.Fatalf("the tag of an ended process: %v", err)
	}
	collect(t, again)
}
