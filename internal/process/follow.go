package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// storeTimeout bounds a record's write when no request's context is at hand.
const storeTimeout = 10 * time.Second

// record stores pr, just started through the daemon (a no-op without a Store).
func (m *Manager) record(ctx context.Context, pr *proc) error {
	if m.cfg.Store == nil {
		return nil
	}
	err := m.cfg.Store.CreateProcess(ctx, store.Process{ID: pr.id, TokenID: pr.owner, User: pr.user, Sandbox: pr.sandbox,
		Command: pr.command, Cwd: pr.cwd, Tag: pr.tag, PID: pr.pid, PTY: pr.pty, Daemon: pr.daemon,
		State: string(StateRunning), StartedAt: pr.started})
	if err != nil {
		return fmt.Errorf("record process %s: %w", pr.id, err)
	}
	return nil
}

// finish ends pr and records its end: it is never adopted again.
func (m *Manager) finish(pr *proc, exit *envd.Exit) {
	pr.finish(exit, m.cfg.Now())
	m.endRecord(pr.id, exit)
}

// endRecord records that process id ended.
func (m *Manager) endRecord(id string, exit *envd.Exit) {
	if m.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := m.cfg.Store.EndProcess(ctx, id, exit.Code, exit.Status, m.cfg.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("record the end of a process", "process", id, "err", err)
	}
}

// daemonError is err, from sb's daemon while doing op: a daemon that does not answer has its
// sandbox checked again, and the error says which part died (the sandbox's failure, not
// hangar's).
func (m *Manager) daemonError(ctx context.Context, sb store.Sandbox, op string, err error) error {
	if errors.Is(err, envd.ErrUnavailable) {
		return m.cfg.Sandboxes.Died(ctx, sb, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// follow is a process's one follower: it drains the daemon's stream into the ring and the
// attachments until the process ends, the follower's stream ends (shutdown; the token revoked:
// then it kills the process) or the Manager closes. A stream that breaks is not an end: the
// process may run on, so the follower reaches it again by its tag (see reconnect).
func (m *Manager) follow(ctx context.Context, cancel context.CancelFunc, pr *proc, st *envd.ProcessStream, fst *stream.Stream) {
	defer fst.Close()
	defer cancel()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watchFollower(ctx, cancel, pr, fst)
	}()
	for st != nil {
		exit, err := drain(pr, st)
		st.Close()
		if err == nil {
			m.finish(pr, exit)
			fst.End(stream.ReasonDone)
			return
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("lost the daemon's stream of a process; reaching it again by its tag", "process", pr.id, "sandbox", pr.sandbox, "err", err)
		st = m.reconnect(ctx, pr)
	}
}

// drain passes the stream's output to pr until the end event (its exit, nil error) or until
// the stream breaks (the error).
func drain(pr *proc, st *envd.ProcessStream) (*envd.Exit, error) {
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil, envd.ErrNoEnd
		}
		if err != nil {
			return nil, err
		}
		switch ev.Kind {
		case envd.EventStdout, envd.EventStderr, envd.EventPTY:
			pr.output(ev.Data)
		case envd.EventEnd:
			return ev.Exit, nil
		}
	}
}

// watchFollower ends the follower when its stream ends, killing the process first when the
// stream ended because the token that started it was revoked.
func (m *Manager) watchFollower(ctx context.Context, cancel context.CancelFunc, pr *proc, fst *stream.Stream) {
	select {
	case <-ctx.Done():
		return
	case <-fst.Done():
	}
	defer cancel()
	if fst.Reason() != stream.ReasonRevoked {
		return
	}
	kctx, kcancel := context.WithTimeout(context.Background(), m.cfg.KillGrace)
	defer kcancel()
	sb, err := m.cfg.Sandboxes.Lookup(kctx, pr.sandbox)
	if err != nil {
		m.log.Error("kill the process of a revoked token", "process", pr.id, "err", err)
		return
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err == nil {
		err = c.Signal(kctx, envd.ByTag(pr.tag), envd.SIGKILL)
	}
	if err != nil && !errors.Is(err, envd.ErrNotFound) {
		m.log.Error("kill the process of a revoked token", "process", pr.id, "err", err)
		return
	}
	m.log.Info("killed the process of a revoked token", "process", pr.id, "sandbox", pr.sandbox, "token", pr.owner)
	m.finish(pr, &envd.Exit{Code: -1, Status: "killed: the token that started it was revoked"})
}

// reconnect waits (backing off from ReconnectMin to ReconnectMax) until it reaches pr again
// through its sandbox's daemon, by tag, and returns the stream. It returns nil when ctx ends, or
// once it learnt what became of the process (then pr has ended): it exited (the daemon no
// longer has it, or another process holds its tag: its exit code is unknown), or it is lost
// (its sandbox failed or is gone, so nothing can reach it). A daemon that does not answer in a
// sandbox its provider says runs, or a paused sandbox, is waited for: the process may still run.
func (m *Manager) reconnect(ctx context.Context, pr *proc) *envd.ProcessStream {
	wait := m.cfg.ReconnectMin
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st, fate, err := m.reach(ctx, pr)
		switch {
		case st != nil:
			m.log.Info("reached a process again", "process", pr.id, "sandbox", pr.sandbox)
			return st
		case fate.state != "":
			m.log.Warn("a followed process is out of reach for good", "process", pr.id, "sandbox", pr.sandbox, "state", fate.state, "why", fate.why)
			exit := &envd.Exit{Code: -1, Status: "unknown: " + fate.why}
			if fate.state == StateLost {
				exit.Status = "lost: " + fate.why
			}
			pr.end(fate.state, exit, m.cfg.Now())
			m.endRecord(pr.id, exit)
			return nil
		}
		m.log.Debug("process not reached yet", "process", pr.id, "err", err, "retry_in", wait)
		wait = min(wait*2, m.cfg.ReconnectMax)
		t.Reset(wait)
	}
}

// fate is what became of a process hangar could not reach: StateExited or StateLost, and why.
type fate struct {
	state State
	why   string
}

// reach tries once to reach pr by its tag. It returns the stream, or the process's fate when it
// is known, or neither and the error that says why not yet.
func (m *Manager) reach(ctx context.Context, pr *proc) (*envd.ProcessStream, fate, error) {
	sb, err := m.cfg.Sandboxes.Lookup(ctx, pr.sandbox)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fate{StateLost, "its sandbox is gone"}, nil
	}
	if err != nil {
		return nil, fate{}, err
	}
	if f, ok := sandboxFate(sb); ok || sb.State != string(provider.StateRunning) {
		return nil, f, fmt.Errorf("sandbox %s is %s", sb.Name, sb.State)
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	var st *envd.ProcessStream
	if err == nil {
		st, err = c.Connect(ctx, envd.ByTag(pr.tag))
	}
	if errors.Is(err, envd.ErrNotFound) {
		return nil, fate{StateExited, "it ended while hangar had no stream from its daemon"}, nil
	}
	if err != nil {
		// The daemon does not answer: has the sandbox (or its daemon) died for good?
		if now, rerr := m.cfg.Sandboxes.Recheck(ctx, sb); rerr == nil {
			if f, ok := sandboxFate(now); ok {
				return nil, f, err
			}
		}
		return nil, fate{}, err
	}
	if st.PID() != pr.pid {
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

// principalOf is the owner of a recorded process, for its follower's stream: enough for the
// stream registry to recheck the token (its id; whether it comes from the tokens file).
func principalOf(rec store.Process) auth.Principal {
	return auth.Principal{TokenID: rec.TokenID, User: rec.User, Static: strings.HasPrefix(rec.TokenID, "static-")}
}
