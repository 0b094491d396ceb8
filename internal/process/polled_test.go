package process

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// localExec is a provider's exec for a sandbox that is this machine, with home as $HOME.
func localExec(home string) execFunc {
	return func(ctx context.Context, script string) (sandbox.ExecResult, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		res := sandbox.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Via: "provider"}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.ExitCode, err = ee.ExitCode(), nil
		}
		return res, err
	}
}

func newPolled(exec execFunc, cmd string) (*polledFollower, *endRecorder) {
	pr := newProc(1 << 10)
	pr.id, pr.sandbox, pr.command, pr.cwd = "p_polled", "plain", cmd, "/"
	rec := &endRecorder{pr: pr}
	return &polledFollower{exec: exec, log: slog.Default(), pr: pr, end: rec.end, pollAttached: time.Millisecond, pollIdle: time.Millisecond, clock: quartz.NewReal(),
		wake: make(chan struct{}, 1)}, rec
}

// TestPolledFollower runs a process through a real shell as a provider's exec would, and
// follows its output file to its exit status.
func TestPolledFollower(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	f, rec := newPolled(localExec(t.TempDir()), "echo hello; echo oops >&2; exit 3")
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	if f.pr.pid == 0 {
		t.Error("no pid after the start")
	}
	f.follow(ctx)
	if rec.calls != 1 || rec.state != StateExited || rec.exit.Code != 3 || rec.exit.Status != "exit status 3" {
		t.Fatalf("ended %d times, last %s %+v; want once, exit status 3", rec.calls, rec.state, rec.exit)
	}
	if data, _, _ := f.pr.ring.read(0); string(data) != "hello\noops\n" {
		t.Errorf("the ring holds %q", data)
	}
	if err := f.input(ctx, store.Sandbox{}, []byte("x"), false); !errors.Is(err, ErrNeedsDaemon) {
		t.Errorf("input to a polled process: %v, want ErrNeedsDaemon", err)
	}
}

// TestPolledFollowerKill: SIGTERM to a polled process's group ends it, without an exit status.
func TestPolledFollowerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	f, rec := newPolled(localExec(t.TempDir()), "echo up; sleep 100")
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); f.follow(ctx) }()
	// Once it printed, its group exists (setsid ran) and can be signalled.
	for f.pr.info().OutputEnd == 0 {
		if ctx.Err() != nil {
			t.Fatal("no output")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.signal(ctx, store.Sandbox{}, envd.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-done
	if rec.state != StateExited || rec.exit.Code != -1 || !strings.HasPrefix(rec.exit.Status, "killed") {
		t.Errorf("ended %s %+v; want killed", rec.state, rec.exit)
	}
}

// TestPolledFollowerStartFails: a start the shell refuses (a cwd that is not there) says so.
func TestPolledFollowerStartFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	f, _ := newPolled(localExec(t.TempDir()), "true")
	f.pr.cwd = "/no/such/dir"
	if err := f.start(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Errorf("start in a missing cwd: %v", err)
	}
}

// scriptedExec answers the polls of a polled follower from a script of results, and checks
// from which offset of the output file each poll reads.
type scriptedExec struct {
	t     *testing.T
	mu    sync.Mutex
	polls []scriptedPoll
}

type scriptedPoll struct {
	from   string // the tail -c +N the poll must use
	stdout string
	status string // the exit status, "" while it runs
}

var tailFrom = regexp.MustCompile(`tail -c \+(\d+)`)

func (s *scriptedExec) exec(_ context.Context, script string) (sandbox.ExecResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := tailFrom.FindStringSubmatch(script)
	if m == nil || len(s.polls) == 0 {
		s.t.Errorf("unexpected exec: %s", script)
		return sandbox.ExecResult{}, errors.New("unexpected")
	}
	p := s.polls[0]
	s.polls = s.polls[1:]
	if m[1] != p.from {
		s.t.Errorf("a poll reads from +%s, want +%s", m[1], p.from)
	}
	return sandbox.ExecResult{Stdout: []byte(p.stdout), Stderr: []byte(p.status)}, nil
}

// TestPolledFollowerStatusWrittenAsItLooks: a process that writes its exit status and exits
// between the poll's read of the status and its look at the process ends with that status, not
// as one that ended without any. (kill, as the poll calls it, stands for that moment here.)
func TestPolledFollowerStatusWrittenAsItLooks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".hangar", "bg"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := localExec(home)
	racing := func(ctx context.Context, script string) (sandbox.ExecResult, error) {
		return local(ctx, `kill() { echo 3 > "$HOME/.hangar/bg/p_polled.exit"; return 1; }
`+script)
	}
	f, rec := newPolled(racing, "x")
	f.pr.pid = 42
	if !f.pollOnce(ctx) {
		t.Fatal("the poll did not see the process end")
	}
	if rec.calls != 1 || rec.exit.Code != 3 || !rec.exit.Exited {
		t.Errorf("ended %d times, last %+v; want exit status 3", rec.calls, rec.exit)
	}
}

// TestPolledFollowerWholeRunes: a character the file's reads cut in two reaches attachments
// whole, and the next read starts after what was read (not after what was passed on).
func TestPolledFollowerWholeRunes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s := &scriptedExec{t: t, polls: []scriptedPoll{
		{from: "1", stdout: "caf\xc3"},
		{from: "5", stdout: "\xa9!"},
		{from: "7", stdout: "\xe2\x82", status: "0"}, // ends inside a character: passed on as it is
	}}
	f, rec := newPolled(s.exec, "x")
	f.pr.pid = 42
	sub, err := stream.New(stream.Config{}).Open(ctx, stream.Options{Kind: stream.KindProcess, Principal: ada, Sandbox: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	f.pr.subs[sub] = struct{}{}
	f.follow(ctx)
	if rec.calls != 1 || rec.exit.Code != 0 {
		t.Fatalf("ended %d times, last %+v", rec.calls, rec.exit)
	}
	items, _ := drainAttachment(ctx, t, &Attachment{Stream: sub, pr: f.pr})
	var all []byte
	for _, it := range items {
		all = append(all, it.Data...)
		if !utf8.Valid(it.Data) && !bytes.Equal(it.Data, []byte("\xe2\x82")) {
			t.Errorf("an output item is not whole UTF-8: %q", it.Data)
		}
	}
	if string(all) != "café!\xe2\x82" {
		t.Errorf("the attachment got %q", all)
	}
}

// TestPolledFollowerPollsByClock: after its first read a polled follower reads again every
// pollIdle by its clock, and not before: the process's end is seen only once the clock moves.
func TestPolledFollowerPollsByClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	clock := quartz.NewMock(t)
	resets := clock.Trap().TimerReset("process", "poll")
	defer resets.Close()
	gate := filepath.Join(t.TempDir(), "go")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) }) // a failed test leaves no process waiting
	f, rec := newPolled(localExec(t.TempDir()), "while [ ! -e "+gate+" ]; do sleep 0.01; done; echo done")
	f.clock, f.pollIdle, f.pollAttached = clock, 5*time.Second, time.Second
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	followed := make(chan struct{})
	go func() { defer close(followed); f.follow(ctx) }()
	// The first read, at once, finds it running: the next is pollIdle away.
	call := resets.MustWait(ctx)
	if call.Duration != 5*time.Second {
		t.Errorf("the next read is %s away, want pollIdle (5s)", call.Duration)
	}
	call.MustRelease(ctx)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for reads := 1; ; reads++ {
		// Only the clock moving makes it read again; each read until the end resets the timer.
		clock.Advance(5 * time.Second).MustWait(ctx)
		select {
		case <-followed:
			if rec.calls != 1 || rec.state != StateExited || rec.exit.Code != 0 {
				t.Errorf("ended %d times, last %s %+v", rec.calls, rec.state, rec.exit)
			}
			return
		case call := <-resetCalls(ctx, resets):
			call.MustRelease(ctx)
		case <-ctx.Done():
			t.Fatalf("still following after %d reads", reads)
		}
	}
}

// resetCalls delivers the next trapped timer reset.
func resetCalls(ctx context.Context, trap *quartz.Trap) <-chan *quartz.Call {
	c := make(chan *quartz.Call, 1)
	go func() {
		if call, err := trap.Wait(ctx); err == nil {
			c <- call
		}
	}()
	return c
}
