package process

import (
	"context"
	"errors"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// follower is one strategy for following a process: what the Manager needs of it, whichever
// way the output arrives. A follower is built already started (or adopted), so that a process
// is listed only once something follows it. There are two: daemonFollower holds the daemon's
// stream of the process and reaches it again by its tag when the stream breaks;
// polledFollower, for a sandbox without a daemon, reads the process's output file through the
// provider's exec.
type follower interface {
	// follow passes the process's output to its proc until the process ended (then follow has
	// ended the proc: see ender) or ctx ended (the Manager closed, or the follower's stream
	// ended). It closes what it holds before it returns.
	follow(ctx context.Context)
	// input writes data to the process's standard input (a terminal's: typed into it), then
	// closes it when eof.
	// sb is the process's sandbox as it is now (its daemon may have moved since the start).
	input(ctx context.Context, sb store.Sandbox, data []byte, eof bool) error
	// signal sends sig (SIGTERM or SIGKILL) to the process's group.
	signal(ctx context.Context, sb store.Sandbox, sig envd.Signal) error
	// resize changes a terminal's size.
	resize(ctx context.Context, sb store.Sandbox, size PTYSize) error
	// attached tells the follower that someone attached: a polled follower reads sooner.
	attached()
}

// ender ends a proc for its follower: the process ended (StateExited) or can no longer be
// reached (StateLost); the Manager records it too. It is safe to call more than once: only the
// first call counts.
type ender func(state State, exit *envd.Exit)

// run follows pr with f, under the Manager's root context, until the process ends, the
// follower's stream fst ends (shutdown; the owner's token revoked: then the process is killed
// first), or the Manager closes.
func (m *Manager) run(pr *proc, f follower, fst *stream.Stream) {
	ctx, cancel := context.WithCancel(m.ctx)
	pr.mu.Lock()
	pr.stop = cancel
	if pr.released { // released between being listed and this: nothing follows it here
		cancel()
	}
	pr.mu.Unlock()
	follow := func() {
		defer fst.Close()
		defer cancel()
		f.follow(ctx)
		if pr.ended() {
			fst.End(stream.ReasonDone)
		}
	}
	if !m.spawn(follow) {
		follow() // the Manager closed: ctx has ended, so this only lets go of what f holds
		return
	}
	m.spawn(func() { m.watchFollower(ctx, cancel, pr, f, fst) })
}

// spawn runs fn in a goroutine that Close waits for, unless the Manager is closed (then it
// reports false and does not run fn).
func (m *Manager) spawn(fn func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
	return true
}

// watchFollower stops the follower when its stream ends, killing the process first when the
// stream ended because the token that started it was revoked.
func (m *Manager) watchFollower(ctx context.Context, cancel context.CancelFunc, pr *proc, f follower, fst *stream.Stream) {
	select {
	case <-ctx.Done():
		return
	case <-fst.Done():
	}
	// The follower stops first, so that the end of a revoked token's process says why it ended
	// rather than the signal's bare account.
	cancel()
	if fst.Reason() != stream.ReasonRevoked {
		return
	}
	kctx, kcancel := context.WithTimeout(m.ctx, m.cfg.KillGrace)
	defer kcancel()
	sb, err := m.cfg.Sandboxes.Lookup(kctx, pr.sandbox)
	if err == nil {
		err = f.signal(kctx, sb, envd.SIGKILL)
	}
	if err != nil && !errors.Is(err, envd.ErrNotFound) {
		m.log.Error("kill the process of a revoked token", "process", pr.id, "err", err)
		return
	}
	m.log.Info("killed the process of a revoked token", "process", pr.id, "sandbox", pr.sandbox, "token", pr.owner)
	m.ender(pr)(StateExited, &envd.Exit{Code: -1, Status: "killed: the token that started it was revoked"})
}

// ender is how pr's follower ends it: pr ends, and so does its record (processes followed
// through the daemon are recorded; see record).
func (m *Manager) ender(pr *proc) ender {
	return func(state State, exit *envd.Exit) {
		if now := m.cfg.Clock.Now(); pr.end(state, exit, now) && pr.recorded {
			m.endRecord(pr.id, exit, now, pr.info().OutputEnd)
		}
	}
}

// kill sends SIGTERM to pr's group, and SIGKILL KillGrace later if it still runs (unless the
// Manager closes first).
func (m *Manager) kill(ctx context.Context, sb store.Sandbox, pr *proc) error {
	if err := pr.f.signal(ctx, sb, envd.SIGTERM); err != nil && !errors.Is(err, envd.ErrNotFound) {
		return err
	}
	m.spawn(func() {
		t := m.cfg.Clock.NewTimer(m.cfg.KillGrace, "process", "kill")
		defer t.Stop()
		select {
		case <-t.C:
		case <-pr.exited:
			return
		case <-m.ctx.Done():
			return
		}
		kctx, cancel := context.WithTimeout(m.ctx, m.cfg.KillGrace)
		defer cancel()
		if err := pr.f.signal(kctx, sb, envd.SIGKILL); err != nil && !errors.Is(err, envd.ErrNotFound) {
			m.log.Warn("kill process", "process", pr.id, "err", err)
		}
	})
	return nil
}
