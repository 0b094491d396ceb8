package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"k8s.io/apimachinery/pkg/util/wait"
)

// daemonFollower follows a process through its sandbox's daemon: it drains the daemon's stream
// of the process into its proc until the process ends. A stream that breaks is not an end: the
// process may run on, so the follower reaches it again by its tag (see reconnect), until it
// learns what became of it.
type daemonFollower struct {
	sbs *sandbox.Manager
	log *slog.Logger
	pr  *proc
	end ender
	// reserve, if not nil, is called with the size of each piece of output before pr is given
	// it: it records the offsets as given out (Manager.reserve).
	reserve func(ctx context.Context, n int)
	// reconnectMin and reconnectMax bound the wait between attempts to reach the process,
	// timed by clock.
	reconnectMin, reconnectMax time.Duration
	clock                      quartz.Clock

	// st is the daemon's stream of the process, cancel ends its context. follow owns them.
	st     *envd.ProcessStream
	cancel context.CancelFunc
}

// daemonError is err, from sb's daemon while doing op: a daemon that does not answer has its
// sandbox checked again, and the error says which part died (the sandbox's failure, not
// hangar's).
func daemonError(ctx context.Context, sbs *sandbox.Manager, sb store.Sandbox, op string, err error) error {
	if errors.Is(err, envd.ErrUnavailable) {
		return sbs.Died(ctx, sb, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// startDaemon starts pr through sb's daemon (on a terminal of size pty, if not nil), records
// it, and returns its follower, not yet following.
func (m *Manager) startDaemon(ctx context.Context, sb store.Sandbox, pr *proc, pty *PTYSize) (follower, error) {
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return nil, err
	}
	argv := provider.ShellArgv(pr.command)
	// The daemon's stream outlives this request: its context is the Manager's.
	sctx, cancel := context.WithCancel(m.ctx)
	req := envd.StartRequest{Cmd: argv[0], Args: argv[1:], Envs: sb.Env, Cwd: pr.cwd, Stdin: true, Tag: pr.tag}
	if pty != nil {
		req.PTY = &envd.PTYSize{Cols: pty.Cols, Rows: pty.Rows}
	}
	st, err := c.Start(sctx, req)
	if err != nil {
		cancel()
		var de *envd.Error
		if errors.As(err, &de) && errors.Is(err, envd.ErrInvalidArgument) {
			// The daemon's words only: the client's operation names the shell hangar runs
			// the command with, which is none of the caller's business.
			return nil, fmt.Errorf("%w: %s", ErrInvalid, de.Message)
		}
		if errors.Is(err, envd.ErrInvalidArgument) {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if ex := sandbox.Exhausted(sb.Name, err); ex != nil {
			return nil, ex
		}
		return nil, daemonError(ctx, m.cfg.Sandboxes, sb, "start process in sandbox "+sb.Name, err)
	}
	pr.pid = st.PID()
	// Recorded before the follower runs, so its end is always recorded after its start; a
	// process hangar cannot record is one it could not find again, so it does not keep it.
	if err := m.record(ctx, pr); err != nil {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.KillGrace)
		c.Signal(kctx, envd.ByTag(pr.tag), envd.SIGKILL)
		kcancel()
		st.Close()
		cancel()
		return nil, err
	}
	return m.daemonFollower(pr, st, cancel), nil
}

// daemonFollower returns pr's follower, holding the daemon's stream st of it (cancel ends
// st's context).
func (m *Manager) daemonFollower(pr *proc, st *envd.ProcessStream, cancel context.CancelFunc) *daemonFollower {
	return &daemonFollower{sbs: m.cfg.Sandboxes, log: m.log, pr: pr, end: m.ender(pr), reserve: func(ctx context.Context, n int) { m.reserve(ctx, pr, n) },
		reconnectMin: m.cfg.ReconnectMin, reconnectMax: m.cfg.ReconnectMax, clock: m.cfg.Clock, st: st, cancel: cancel}
}

func (f *daemonFollower) follow(ctx context.Context) {
	out, flush := stream.WholeRunes(func(_ string, data []byte) {
		if f.reserve != nil {
			f.reserve(ctx, len(data))
		}
		f.pr.output(data, f.clock.Now())
	})
	for f.st != nil {
		stop := context.AfterFunc(ctx, f.cancel)
		exit, err := drain(f.st, out)
		stop()
		f.st.Close()
		f.cancel()
		if err == nil {
			flush()
			f.end(StateExited, exit)
			return
		}
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("lost the daemon's stream of a process; reaching it again by its tag", "process", f.pr.id, "sandbox", f.pr.sandbox, "err", err)
		f.st, f.cancel = f.reconnect(ctx)
	}
}

// drain passes the stream's output to out, by stream, until the end event (its exit, nil
// error) or until the stream breaks (the error).
func drain(st *envd.ProcessStream, out func(name string, data []byte)) (*envd.Exit, error) {
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil, envd.ErrNoEnd
		}
		if err != nil {
			return nil, err
		}
		switch ev.Kind {
		case envd.EventStdout:
			out("stdout", ev.Data)
		case envd.EventStderr:
			out("stderr", ev.Data)
		case envd.EventPTY:
			out("pty", ev.Data)
		case envd.EventEnd:
			return ev.Exit, nil
		}
	}
}

// reconnect waits (backing off from reconnectMin to reconnectMax) until it reaches the process
// again through its sandbox's daemon, by tag, and returns the stream. It returns nil when ctx
// ends, or once it learnt what became of the process (then it has ended it): it exited (the
// daemon no longer has it, or another process holds its tag: its exit code is unknown), or it
// is lost (its sandbox failed or is gone, so nothing can reach it). A daemon that does not
// answer in a sandbox its provider says runs, or a paused sandbox, is waited for: the process
// may still run.
func (f *daemonFollower) reconnect(ctx context.Context) (*envd.ProcessStream, context.CancelFunc) {
	backoff := wait.Backoff{Duration: f.reconnectMin, Factor: 2, Steps: math.MaxInt32, Cap: f.reconnectMax}
	t := f.clock.NewTimer(backoff.Step(), "process", "reconnect")
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-t.C:
		}
		sctx, cancel := context.WithCancel(ctx)
		st, fate, err := f.reach(sctx)
		switch {
		case st != nil:
			f.log.Info("reached a process again", "process", f.pr.id, "sandbox", f.pr.sandbox)
			return st, cancel
		case fate.state != "":
			cancel()
			f.log.Warn("a followed process is out of reach for good", "process", f.pr.id, "sandbox", f.pr.sandbox, "state", fate.state, "why", fate.why)
			exit := &envd.Exit{Code: -1, Status: "unknown: " + fate.why}
			if fate.state == StateLost {
				exit.Status = "lost: " + fate.why
			}
			f.end(fate.state, exit)
			return nil, nil
		}
		cancel()
		next := backoff.Step()
		f.log.Debug("process not reached yet", "process", f.pr.id, "err", err, "retry_in", next)
		t.Reset(next, "process", "reconnect")
	}
}

// fate is what became of a process hangar could not reach: StateExited or StateLost, and why.
type fate struct {
	state State
	why   string
}

// reach tries once to reach the process by its tag. It returns the stream, or the process's
// fate when it is known, or neither and the error that says why not yet.
func (f *daemonFollower) reach(ctx context.Context) (*envd.ProcessStream, fate, error) {
	sb, err := f.sbs.Lookup(ctx, f.pr.sandbox)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fate{StateLost, "its sandbox is gone"}, nil
	}
	if err != nil {
		return nil, fate{}, err
	}
	if fa, ok := sandboxFate(sb); ok || sb.State != string(provider.StateRunning) {
		return nil, fa, fmt.Errorf("sandbox %s is %s", sb.Name, sb.State)
	}
	c, err := f.sbs.Daemon(sb)
	var st *envd.ProcessStream
	if err == nil {
		st, err = c.Connect(ctx, envd.ByTag(f.pr.tag))
	}
	if errors.Is(err, envd.ErrNotFound) {
		return nil, fate{StateExited, "it ended while hangar had no stream from its daemon"}, nil
	}
	if err != nil {
		// The daemon does not answer: has the sandbox (or its daemon) died for good?
		if now, rerr := f.sbs.Recheck(ctx, sb); rerr == nil {
			if fa, ok := sandboxFate(now); ok {
				return nil, fa, err
			}
		}
		return nil, fate{}, err
	}
	if st.PID() != f.pr.pid {
		st.Close()
		return nil, fate{StateExited, fmt.Sprintf("it ended while hangar had no stream from its daemon, and another process (pid %d) took its tag", st.PID())}, nil
	}
	return st, fate{}, nil
}

// sandboxFate is the fate of the processes of a sandbox that is destroyed (they were killed
// with it) or failed (nothing can reach them).
func sandboxFate(sb store.Sandbox) (fate, bool) {
	switch provider.State(sb.State) {
	case provider.StateDestroyed:
		return fate{StateExited, "its sandbox was destroyed"}, true
	case provider.StateFailed:
		return fate{StateLost, strings.TrimSpace("its sandbox failed: " + sb.Reason)}, true
	}
	return fate{}, false
}

func (f *daemonFollower) input(ctx context.Context, sb store.Sandbox, data []byte, eof bool) error {
	c, err := f.sbs.Daemon(sb)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		send := c.SendInput
		if f.pr.pty {
			send = c.SendPTYInput // typed into the terminal
		}
		if err := send(ctx, envd.ByTag(f.pr.tag), data); err != nil {
			return f.inputError(ctx, sb, err)
		}
	}
	if eof && f.pr.pty {
		return fmt.Errorf("%w: a terminal has no end of input to close; type exit or kill it", ErrInvalid)
	}
	if eof {
		if err := c.CloseStdin(ctx, envd.ByTag(f.pr.tag)); err != nil {
			return f.inputError(ctx, sb, err)
		}
	}
	return nil
}

func (f *daemonFollower) inputError(ctx context.Context, sb store.Sandbox, err error) error {
	if errors.Is(err, envd.ErrNotFound) || errors.Is(err, envd.ErrFailedPrecondition) {
		return fmt.Errorf("%w: %s: %v", ErrExited, f.pr.id, err)
	}
	return daemonError(ctx, f.sbs, sb, "input to process "+f.pr.id, err)
}

func (f *daemonFollower) signal(ctx context.Context, sb store.Sandbox, sig envd.Signal) error {
	c, err := f.sbs.Daemon(sb)
	if err != nil {
		return err
	}
	if err := c.Signal(ctx, envd.ByTag(f.pr.tag), sig); err != nil {
		return daemonError(ctx, f.sbs, sb, "kill process "+f.pr.id, err)
	}
	return nil
}

func (f *daemonFollower) resize(ctx context.Context, sb store.Sandbox, size PTYSize) error {
	c, err := f.sbs.Daemon(sb)
	if err != nil {
		return err
	}
	if err := c.ResizePTY(ctx, envd.ByTag(f.pr.tag), envd.PTYSize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		return f.inputError(ctx, sb, err)
	}
	return nil
}

// attached: the daemon's stream brings output as it is printed.
func (f *daemonFollower) attached() {}

// storeTimeout bounds a record's write when no request's context is at hand.
const storeTimeout = 10 * time.Second

// record stores pr, just started through the daemon (a no-op without a Store).
func (m *Manager) record(ctx context.Context, pr *proc) error {
	if m.cfg.Store == nil {
		return nil
	}
	pr.mark = m.cfg.OffsetReserve
	err := m.cfg.Store.CreateProcess(ctx, store.Process{ID: pr.id, TokenID: pr.owner, User: pr.user, Grant: pr.grant, Sandbox: pr.sandbox,
		Command: pr.command, Cwd: pr.cwd, Tag: pr.tag, PID: pr.pid, PTY: pr.pty, Daemon: pr.daemon,
		State: string(StateRunning), StartedAt: pr.started, OutputEnd: pr.mark})
	if err != nil {
		return fmt.Errorf("record process %s: %w", pr.id, err)
	}
	pr.recorded = true
	return nil
}

// reserve records, before pr's follower gives it n more bytes of output, that its offsets are
// given out past them: whoever adopts the process later (this control plane after a restart,
// a crash included, or another replica) starts its offsets at the recorded mark, so an offset
// a client holds never names other output. The mark is kept strictly past the end, so that
// a client that had read everything still gets a gap for what was printed while no hangar
// followed. One write per OffsetReserve of output; a write that fails is logged and the output
// passed on all the same (losing output would be worse than a repeat of offsets after a crash).
func (m *Manager) reserve(ctx context.Context, pr *proc, n int) {
	if !pr.recorded || m.cfg.Store == nil {
		return
	}
	pr.mu.Lock()
	end := pr.ring.end + int64(n)
	pr.mu.Unlock()
	if end < pr.mark {
		return
	}
	pr.mark = end + m.cfg.OffsetReserve
	wctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := m.cfg.Store.SetProcessOutput(wctx, pr.id, pr.mark); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("record how far a process's output went", "process", pr.id, "err", err)
	}
}

// endRecord records that process id ended at at; outputEnd, when not negative, is where its
// output ended (else the record keeps the mark it has).
func (m *Manager) endRecord(id string, exit *envd.Exit, at time.Time, outputEnd int64) {
	if m.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if outputEnd >= 0 {
		if err := m.cfg.Store.SetProcessOutput(ctx, id, outputEnd); err != nil && !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("record where a process's output ended", "process", id, "err", err)
		}
	}
	if err := m.cfg.Store.EndProcess(ctx, id, exit.Code, exit.Status, at); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("record the end of a process", "process", id, "err", err)
	}
}

// principalOf is the owner of a recorded process, for its follower's stream: enough for the
// stream registry to recheck the token (its id; whether it comes from the tokens file).
func principalOf(rec store.Process) auth.Principal {
	return auth.Principal{TokenID: rec.TokenID, User: rec.User, Grant: rec.Grant, Static: strings.HasPrefix(rec.TokenID, "static-")}
}
