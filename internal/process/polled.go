package process

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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

func (m *Manager) providerExec(ctx context.Context, sb store.Sandbox, script string) (sandbox.ExecResult, error) {
	return m.cfg.Sandboxes.ExecStream(ctx, sb, sandbox.ExecRequest{Command: script, Timeout: time.Minute}, nil)
}

func (m *Manager) startPolled(ctx context.Context, sb store.Sandbox, pr *proc, fst *stream.Stream) error {
	script := `d="$HOME/.hangar/bg"; mkdir -p "$d" || exit 1; cd ` + shellQuote(pr.cwd) + ` || exit 1
setsid sh -c 'if command -v bash >/dev/null 2>&1; then bash -lc "$1"; else sh -c "$1"; fi; echo $? > "$2.exit"' hangar-bg ` +
		shellQuote(pr.command) + ` "$d/` + pr.id + `" > "$d/` + pr.id + `.out" 2>&1 < /dev/null &
echo $!`
	res, err := m.providerExec(ctx, sb, script)
	if err != nil {
		return fmt.Errorf("start process in sandbox %s: %w", sb.Name, err)
	}
	pid, err := strconv.ParseUint(strings.TrimSpace(string(res.Stdout)), 10, 32)
	if res.ExitCode != 0 || err != nil {
		return fmt.Errorf("%w: could not start it in %s (exit %d): %s", ErrInvalid, pr.cwd, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	pr.pid = uint32(pid)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.poll(sb, pr, fst)
	}()
	return nil
}

func (m *Manager) wakePoller(pr *proc) {
	select {
	case pr.wake <- struct{}{}:
	default: // a wake-up is pending
	}
}

// poll is a daemon-less process's follower: it reads new output every PollAttached while
// someone is attached and every PollIdle otherwise, until the process ends or the follower's
// stream ends (killing the process when its token was revoked).
func (m *Manager) poll(sb store.Sandbox, pr *proc, fst *stream.Stream) {
	defer fst.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		pr.mu.Lock()
		every := m.cfg.PollIdle
		if len(pr.subs) > 0 {
			every = m.cfg.PollAttached
		}
		pr.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-fst.Done():
			t.Stop()
			if fst.Reason() == stream.ReasonRevoked {
				m.signalPolled(ctx, sb, pr, "KILL")
			}
			return
		case <-pr.wake:
		case <-t.C:
		}
		t.Stop()
		if done := m.pollOnce(ctx, sb, pr); done {
			fst.End(stream.ReasonDone)
			return
		}
	}
}

// pollOnce reads what is new; it reports true once the process has ended and all its output
// was read.
func (m *Manager) pollOnce(ctx context.Context, sb store.Sandbox, pr *proc) bool {
	pr.mu.Lock()
	off := pr.ring.end
	pr.mu.Unlock()
	file := `"$HOME/.hangar/bg/` + pr.id
	// The exit status goes to stderr (>&2 first, so cat's own complaints go to /dev/null).
	// A group killed by a signal writes no status: then the leader is simply gone.
	script := `cat ` + file + `.exit" >&2 2>/dev/null || kill -0 ` + strconv.FormatUint(uint64(pr.pid), 10) + ` 2>/dev/null || echo gone >&2; tail -c +` + strconv.FormatInt(off+1, 10) + ` ` + file + `.out" 2>/dev/null | head -c ` + strconv.Itoa(pollChunk)
	res, err := m.providerExec(ctx, sb, script)
	if errors.Is(err, provider.ErrNotFound) { // the sandbox is gone, and the process with it
		pr.finish(&envd.Exit{Code: -1, Status: "unknown: " + err.Error()}, m.cfg.Now())
		return true
	}
	if err != nil {
		m.log.Warn("poll background process", "process", pr.id, "sandbox", sb.Name, "err", err)
		return false
	}
	if len(res.Stdout) > 0 {
		pr.output(res.Stdout)
	}
	status := strings.TrimSpace(string(res.Stderr))
	if status == "" || len(res.Stdout) >= pollChunk {
		return false // still running, or more output to read first
	}
	exit := &envd.Exit{Code: -1, Status: "killed: it ended without an exit status"}
	if code, err := strconv.Atoi(status); err == nil {
		exit = &envd.Exit{Code: code, Exited: true, Status: "exit status " + status}
	}
	pr.finish(exit, m.cfg.Now())
	return true
}

func (m *Manager) signalPolled(ctx context.Context, sb store.Sandbox, pr *proc, sig string) error {
	_, err := m.providerExec(ctx, sb, "kill -"+sig+" -"+strconv.FormatUint(uint64(pr.pid), 10)+" 2>/dev/null || true")
	return err
}

// killPolled sends SIGTERM to the process group, and SIGKILL KillGrace later if it still runs.
func (m *Manager) killPolled(ctx context.Context, sb store.Sandbox, pr *proc) error {
	if err := m.signalPolled(ctx, sb, pr, "TERM"); err != nil {
		return fmt.Errorf("kill process %s: %w", pr.id, err)
	}
	m.wakePoller(pr)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(m.cfg.KillGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-pr.exited:
			return
		}
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.signalPolled(kctx, sb, pr, "KILL")
		m.wakePoller(pr)
	}()
	return nil
}
