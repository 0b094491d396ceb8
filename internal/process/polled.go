package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// A process in a sandbox without a daemon runs detached (setsid) through the provider's exec,
// its output in ~/.hangar/bg/<id>.out and its exit status, once it ends, in
// ~/.hangar/bg/<id>.exit; hangar polls them.

// pollChunk bounds one poll's read, so a result stays under the provider exec's output cap.
const pollChunk = 128 << 10

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// execFunc runs a shell script in the process's sandbox through its provider and returns its
// result (an error: it could not be run).
type execFunc func(ctx context.Context, script string) (sandbox.ExecResult, error)

// polledFollower follows a process in a sandbox without a daemon: it reads the process's
// output file every pollAttached while someone is attached and every pollIdle otherwise, until
// the process ends. It takes no input.
type polledFollower struct {
	exec execFunc
	log  *slog.Logger
	pr   *proc
	end  ender
	// pollAttached and pollIdle are how often the output is read, with and without attachments,
	// timed by clock.
	pollAttached, pollIdle time.Duration
	clock                  quartz.Clock

	wake chan struct{} // capacity 1: poll now
	// read is how much of the output file was read: the ring's end, plus the start of a
	// character whose end is not read yet (held back by runes). follow's.
	read  int64
	runes stream.Runes
}

// startPolled starts pr in sb through its provider and returns its follower, not yet following.
func (m *Manager) startPolled(ctx context.Context, sb store.Sandbox, pr *proc) (follower, error) {
	exec := func(ctx context.Context, script string) (sandbox.ExecResult, error) {
		return m.cfg.Sandboxes.ExecStream(ctx, sb, sandbox.ExecRequest{Command: script, Timeout: time.Minute}, nil)
	}
	f := &polledFollower{exec: exec, log: m.log, pr: pr, end: m.ender(pr), pollAttached: m.cfg.PollAttached, pollIdle: m.cfg.PollIdle, clock: m.cfg.Clock,
		wake: make(chan struct{}, 1)}
	if err := f.start(ctx); err != nil {
		return nil, fmt.Errorf("start process in sandbox %s: %w", sb.Name, err)
	}
	return f, nil
}

// start starts the process, detached, and learns its pid.
func (f *polledFollower) start(ctx context.Context) error {
	pr := f.pr
	script := `d="$HOME/.hangar/bg"; mkdir -p "$d" || exit 1; cd ` + shellQuote(pr.cwd) + ` || exit 1
setsid sh -c 'if command -v bash >/dev/null 2>&1; then bash -lc "$1"; else sh -c "$1"; fi; echo $? > "$2.exit"' hangar-bg ` +
		shellQuote(pr.command) + ` "$d/` + pr.id + `" > "$d/` + pr.id + `.out" 2>&1 < /dev/null &
echo $!`
	res, err := f.exec(ctx, script)
	if err != nil {
		return err
	}
	pid, err := strconv.ParseUint(strings.TrimSpace(string(res.Stdout)), 10, 32)
	if res.ExitCode != 0 || err != nil {
		return fmt.Errorf("%w: could not start it in %s (exit %d): %s", ErrInvalid, pr.cwd, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	pr.pid = uint32(pid)
	return nil
}

func (f *polledFollower) attached() {
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is pending
	}
}

func (f *polledFollower) follow(ctx context.Context) {
	t := f.clock.NewTimer(0, "process", "poll")
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-t.C:
		}
		if f.pollOnce(ctx) {
			return
		}
		every := f.pollIdle
		if f.pr.attachments() > 0 {
			every = f.pollAttached
		}
		t.Reset(every, "process", "poll")
	}
}

// pollOnce reads what is new; it reports true once the process has ended (and it ended it)
// and all its output was read.
func (f *polledFollower) pollOnce(ctx context.Context) bool {
	pr := f.pr
	file := `"$HOME/.hangar/bg/` + pr.id
	// The exit status goes to stderr (>&2 first, so cat's own complaints go to /dev/null).
	// A group killed by a signal writes no status: then the leader is simply gone. The status
	// is read again once the leader is gone: it writes it as its last act, so it may have done
	// so since the first read.
	exitFile := `cat ` + file + `.exit" >&2 2>/dev/null`
	script := exitFile + ` || kill -0 ` + strconv.FormatUint(uint64(pr.pid), 10) + ` 2>/dev/null || ` + exitFile + ` || echo gone >&2; tail -c +` + strconv.FormatInt(f.read+1, 10) + ` ` + file + `.out" 2>/dev/null | head -c ` + strconv.Itoa(pollChunk)
	res, err := f.exec(ctx, script)
	if errors.Is(err, provider.ErrNotFound) { // the sandbox is gone, and the process with it
		f.output(f.runes.Flush())
		f.end(StateExited, &envd.Exit{Code: -1, Status: "unknown: " + err.Error()})
		return true
	}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("poll background process", "process", pr.id, "sandbox", pr.sandbox, "err", err)
		}
		return false
	}
	f.read += int64(len(res.Stdout))
	f.output(f.runes.Cut(res.Stdout))
	status := strings.TrimSpace(string(res.Stderr))
	if status == "" || len(res.Stdout) >= pollChunk {
		return false // still running, or more output to read first
	}
	f.output(f.runes.Flush())
	exit := &envd.Exit{Code: -1, Status: "killed: it ended without an exit status"}
	if code, err := strconv.Atoi(status); err == nil {
		exit = &envd.Exit{Code: code, Exited: true, Status: "exit status " + status}
	}
	f.end(StateExited, exit)
	return true
}

func (f *polledFollower) output(data []byte) {
	if len(data) > 0 {
		f.pr.output(data, f.clock.Now())
	}
}

func (f *polledFollower) input(context.Context, store.Sandbox, []byte, bool) error {
	return fmt.Errorf("%w: input to a background process needs the sandbox's daemon, and %s has none", ErrNeedsDaemon, f.pr.sandbox)
}

func (f *polledFollower) resize(context.Context, store.Sandbox, PTYSize) error {
	return fmt.Errorf("%w: a terminal needs the sandbox's daemon, and %s has none", ErrNeedsDaemon, f.pr.sandbox)
}

// signal signals the process's group, then polls at once to see it end.
func (f *polledFollower) signal(ctx context.Context, _ store.Sandbox, sig envd.Signal) error {
	name := "TERM"
	if sig == envd.SIGKILL {
		name = "KILL"
	}
	if _, err := f.exec(ctx, "kill -"+name+" -"+strconv.FormatUint(uint64(f.pr.pid), 10)+" 2>/dev/null || true"); err != nil {
		return fmt.Errorf("kill process %s: %w", f.pr.id, err)
	}
	f.attached()
	return nil
}
