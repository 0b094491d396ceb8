package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// MaxExecTimeout is the longest timeout an exec may ask for.
const MaxExecTimeout = 24 * time.Hour

// ExecRequest is one command to run to its end.
type ExecRequest struct {
	Command string
	Cwd     string            // "": the sandbox's workdir
	Env     map[string]string // added to the sandbox's
	Timeout time.Duration     // 0: none; at most MaxExecTimeout

	// started, when set, is told once whether the command started (nil) or why not: StreamExec
	// answers a start that failed as an error of its own, before any stream is sent.
	started func(error)
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int
	Status   string // the daemon's account, e.g. "exit status 2" or "signal: killed"
	Stdout   []byte // the last provider.MaxExecOutput bytes
	Stderr   []byte // the last provider.MaxExecOutput bytes
	TimedOut bool   // killed because Timeout passed
	Via      string // "daemon" or "provider"
	Streamed bool   // output was passed on as it was read (ExecStream through a daemon)
	// Detached is set when the caller let go of a command still running (ErrDetach): it goes
	// on in the sandbox, and ExitCode and Status mean nothing.
	Detached bool
}

// ErrDetach, as the cause of ExecStream's context (context.WithCancelCause), lets go of the
// command without killing it: it runs on to its end or its timeout, like an unstreamed exec.
// Any other end of the context kills it.
var ErrDetach = errors.New("detached: the command goes on in the sandbox")

// OutputFunc receives a command's output as it is read: stream is "stdout" or "stderr". It is
// called from one goroutine, in order. It may block: the command then waits for it, as for a
// slow terminal (the daemon holds the command's output back meanwhile).
type OutputFunc func(stream string, data []byte)

// TimeoutSeconds is the timeout a client gives in seconds, as an ExecRequest's Timeout: 0 is
// none; anything else must be from a millisecond to MaxExecTimeout (a tiny one would round to
// none, a huge one overflow).
func TimeoutSeconds(s float64) (time.Duration, error) {
	if s == 0 {
		return 0, nil
	}
	if !(s >= 0.001 && s <= MaxExecTimeout.Seconds()) { // NaN fails too
		return 0, fmt.Errorf("%w: timeout must be 0 (none) or from 0.001 to %d seconds, not %g", ErrInvalid, int(MaxExecTimeout.Seconds()), s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

func (r ExecRequest) check() error {
	if r.Command == "" {
		return fmt.Errorf("%w: command is empty", ErrInvalid)
	}
	if err := limits.CheckCommand(r.Command); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Timeout < 0 || r.Timeout > MaxExecTimeout {
		return fmt.Errorf("%w: timeout must be between 0 (none) and %d seconds", ErrInvalid, int(MaxExecTimeout.Seconds()))
	}
	if err := limits.CheckEnv(r.Env); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := limits.CheckPath(r.Cwd); err != nil {
		return fmt.Errorf("%w: cwd: %v", ErrInvalid, err)
	}
	return nil
}

// Runnable returns the sandbox ref if p may see it and it can run commands now.
func (m *Manager) Runnable(ctx context.Context, p auth.Principal, ref string) (store.Sandbox, error) {
	sb, err := m.Get(ctx, p, ref)
	if err != nil {
		return sb, err
	}
	switch provider.State(sb.State) {
	case provider.StateRunning:
		return sb, nil
	case provider.StatePaused:
		return sb, fmt.Errorf("%w: sandbox %s is paused; resume it first", ErrState, sb.Name)
	case provider.StateFailed:
		return sb, fmt.Errorf("%w: sandbox %s failed: %s", ErrState, sb.Name, sb.Reason)
	default:
		return sb, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.Name, sb.State)
	}
}

// Exec runs a command in the sandbox ref and returns how it ended: through the sandbox's daemon
// when it has one, else through the provider's own exec. A client that goes away kills it.
func (m *Manager) Exec(ctx context.Context, p auth.Principal, ref string, req ExecRequest) (ExecResult, error) {
	if err := req.check(); err != nil {
		return ExecResult{}, err
	}
	sb, err := m.Runnable(ctx, p, ref)
	if err != nil {
		return ExecResult{}, err
	}
	return m.ExecStream(ctx, sb, req, nil)
}

// CheckExec checks an exec request before a stream is opened for it.
func CheckExec(req ExecRequest) error { return req.check() }

// ExecStream runs a command in sb (from Runnable) and returns how it ended. When ctx ends and
// the command is killed, the error is ctx's; when the daemon's stream breaks, the error says so.
// Either way the result holds the output read until then. Through a daemon,
// out (when not nil) gets the output as it is read and the result is Streamed; without one the
// provider's exec runs it and the output is only in the result. When ctx ends the command is
// killed, unless the cause is ErrDetach (see there).
func (m *Manager) ExecStream(ctx context.Context, sb store.Sandbox, req ExecRequest, out OutputFunc) (ExecResult, error) {
	if err := req.check(); err != nil {
		return ExecResult{}, err
	}
	if sb.DaemonURL != "" {
		if out != nil {
			// A read may end inside a character: carry it over, so text stays text.
			var flush func()
			out, flush = stream.WholeRunes(out)
			defer flush()
		}
		res, err := m.execDaemon(ctx, sb, req, out)
		return timedOut(res), err
	}
	prov, err := m.provider(sb)
	if err != nil {
		return ExecResult{}, err
	}
	if req.started != nil {
		req.started(nil) // the provider's exec says nothing before the command's end
	}
	// The provider's exec kills the command when its context ends, so it gets a context of its
	// own, ended only when the command must die: a detached caller leaves it running.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	type outcome struct {
		res provider.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	// It ends when the command does (or its timeout passes), detached or not.
	go func() {
		defer cancel()
		res, err := prov.Exec(pctx, providerView(sb), provider.ExecRequest{Command: req.Command, Cwd: req.Cwd, Env: req.Env, Timeout: req.Timeout})
		done <- outcome{res, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrDetach) {
			return ExecResult{Via: "provider", Detached: true}, nil // it runs on, to its end or timeout
		}
		cancel()
		o = <-done
	}
	if o.err != nil {
		return ExecResult{}, providerError("exec in sandbox "+sb.Name, o.err)
	}
	// The daemon's words for how it ended, so a result reads the same whichever way it ran.
	status := fmt.Sprintf("exit status %d", o.res.ExitCode)
	return timedOut(ExecResult{ExitCode: o.res.ExitCode, Status: status, Stdout: o.res.Stdout, Stderr: o.res.Stderr, TimedOut: o.res.TimedOut, Via: "provider"}), nil
}

// timedOut gives a command killed at its timeout one answer whichever way it ran: exit code -1
// (it has no exit status of its own; the daemon, like E2B's envd, says -1 for a process a
// signal ended, where a provider's shell said 128+9) with timed_out true.
func timedOut(res ExecResult) ExecResult {
	if res.TimedOut {
		res.ExitCode, res.Status = -1, "killed at the timeout"
	}
	return res
}

// Daemon returns the client of the sandbox's daemon. Clients are kept, one per sandbox and
// daemon address, so their connections are reused; the Manager closes them.
func (m *Manager) Daemon(sb store.Sandbox) (*envd.Client, error) {
	if sb.DaemonURL == "" {
		return nil, fmt.Errorf("%w: sandbox %s has no daemon", ErrState, sb.Name)
	}
	key := daemonKey{sb.Name, sb.DaemonURL, sb.DaemonToken}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.daemons[key]; ok {
		return c, nil
	}
	c, err := envd.New(envd.Config{URL: sb.DaemonURL, AccessToken: sb.DaemonToken})
	if err != nil {
		m.log.Error("daemon client", "sandbox", sb.Name, "err", err)
		return nil, fmt.Errorf("%w: sandbox %s's daemon cannot be reached (the server log has the cause)", ErrUnavailable, sb.Name)
	}
	m.daemons[key] = c
	return c, nil
}

// forgetDaemon drops and closes the clients of a sandbox's daemons.
func (m *Manager) forgetDaemon(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.daemons {
		if k.sandbox == name {
			c.Close()
			delete(m.daemons, k)
		}
	}
}

// Close closes the daemon clients' idle connections. Call it when nothing uses the Manager.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.daemons {
		c.Close()
		delete(m.daemons, k)
	}
}

// execTag names one exec's process in its daemon: "exec:" and 12 random hex digits.
func execTag() string { return ids.Hex("exec:", 12) }

// killGrace is how long past its timeout a command may take to be reported ended by the daemon
// (which kills it at the timeout) before hangar kills it itself and stops waiting.
const killGrace = 5 * time.Second

// execDaemon runs a command through the sandbox's daemon: start it, then read its events to
// its end.
func (m *Manager) execDaemon(ctx context.Context, sb store.Sandbox, req ExecRequest, out OutputFunc) (ExecResult, error) {
	c, err := m.Daemon(sb)
	if err != nil {
		return ExecResult{}, err
	}
	// The daemon kills the command at req.Timeout (the Lifetime it is sent); hangar stops
	// waiting killGrace later. runCtx carries no deadline: envd.Client.Start sends the Lifetime,
	// never a context's deadline, as Connect-Timeout-Ms.
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = timeout(ctx, m.cfg.Clock, req.Timeout+killGrace)
	}
	defer cancel()
	started := m.cfg.Clock.Now()
	st, err := m.startDaemonExec(ctx, runCtx, c, sb, req)
	if req.started != nil {
		req.started(err)
	}
	if err != nil {
		return ExecResult{}, err
	}
	defer st.Close()
	return m.readDaemonExec(ctx, c, sb, st, req, started, out)
}

// timeout is context.WithTimeout on clock: once d has passed on it, the context is done and
// its Err is context.DeadlineExceeded, as WithTimeout's would be.
func timeout(ctx context.Context, clock quartz.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) }, "sandbox", "exec", "timeout")
	return deadlined{cctx}, func() { t.Stop(); cancel(context.Canceled) }
}

// deadlined is a context whose Err says a passed deadline as a deadline, not a cancel.
type deadlined struct{ context.Context }

func (c deadlined) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// startDaemonExec starts the command in the daemon under a tag of its own, so that a command
// whose caller left before its start event came back can still be found and killed.
func (m *Manager) startDaemonExec(ctx, runCtx context.Context, c *envd.Client, sb store.Sandbox, req ExecRequest) (*envd.ProcessStream, error) {
	argv := provider.ShellArgv(req.Command)
	cwd := req.Cwd
	if cwd == "" {
		cwd = sb.Workdir
	}
	env := map[string]string{}
	for k, v := range sb.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	tag := execTag()
	st, err := c.Start(runCtx, envd.StartRequest{Cmd: argv[0], Args: argv[1:], Envs: env, Cwd: cwd, Lifetime: req.Timeout, Tag: tag})
	if err != nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrDetach) {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
		c.Signal(kctx, envd.ByTag(tag), envd.SIGKILL)
		kcancel()
	}
	if err == nil {
		return st, nil
	}
	var de *envd.Error
	switch {
	case errors.As(err, &de) && errors.Is(err, envd.ErrInvalidArgument):
		// The daemon's words only: the client's operation names the shell hangar runs the
		// command with, which is none of the caller's business.
		return nil, fmt.Errorf("%w: %s", ErrInvalid, de.Message)
	case errors.Is(err, envd.ErrInvalidArgument):
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	case errors.Is(err, envd.ErrUnavailable):
		return nil, m.died(ctx, sb, err)
	case errors.Is(err, envd.ErrExhausted):
		return nil, Exhausted(sb.Name, err)
	default:
		return nil, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
}

// readDaemonExec reads a started command's events to its end, passing its output on to out
// (when set) and keeping the last of it. When the daemon's stream breaks it tells apart a
// detached caller (the command runs on), a caller gone or a timeout passed (the command is
// killed) and a daemon that died.
func (m *Manager) readDaemonExec(ctx context.Context, c *envd.Client, sb store.Sandbox, st *envd.ProcessStream, req ExecRequest, started time.Time, out OutputFunc) (ExecResult, error) {
	res := ExecResult{Via: "daemon", Streamed: out != nil}
	stdout, stderr := &provider.TailBuffer{}, &provider.TailBuffer{}
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
			if errors.Is(context.Cause(ctx), ErrDetach) {
				res.Detached = true
				return res, nil
			}
			// The client went away or the timeout passed without an end: the command must
			// not outlive the request, so kill its process group.
			kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace)
			c.Signal(kctx, envd.ByPID(st.PID()), envd.SIGKILL)
			kcancel()
			if ctx.Err() != nil {
				// What it printed before it was killed, for a caller that can still say so.
				res.ExitCode, res.Status = -1, "killed: "+context.Cause(ctx).Error()
				return res, ctx.Err()
			}
			if req.Timeout > 0 && m.cfg.Clock.Since(started) >= req.Timeout {
				res.TimedOut, res.ExitCode, res.Status = true, -1, "killed at the timeout"
				break
			}
			// The daemon, or the sandbox under it, died: the sandbox's failure, not hangar's.
			res.ExitCode, res.Status = -1, "unknown: the daemon's stream broke"
			return res, m.died(ctx, sb, err)
		}
		// Output goes on to its client before its tail is kept: the client waits for it.
		switch ev.Kind {
		case envd.EventStdout, envd.EventPTY:
			if out != nil {
				out("stdout", ev.Data)
			}
			stdout.Write(ev.Data)
		case envd.EventStderr:
			if out != nil {
				out("stderr", ev.Data)
			}
			stderr.Write(ev.Data)
		case envd.EventEnd:
			res.ExitCode, res.Status = ev.Exit.Code, ev.Exit.Status
			if !ev.Exit.Exited && req.Timeout > 0 && m.cfg.Clock.Since(started) >= req.Timeout {
				res.TimedOut = true
			}
		}
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	return res, nil
}
