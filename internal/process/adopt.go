package process

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// AdoptAll follows again every process that the records say runs, in every running sandbox:
// call it at start, so a process whose token is revoked after a restart is killed like any
// other (its follower's stream is rechecked), and admins see every process. A record whose
// sandbox is gone, destroyed or failed is ended; one in a paused sandbox is adopted once the
// sandbox runs and is listed. Processes that ended (before, or as hangar learns it now) stay
// listed for Retention from their recorded end. Records of processes that ended more than
// Retention ago are deleted. Without a Store it does nothing.
func (m *Manager) AdoptAll(ctx context.Context) {
	if m.cfg.Store == nil {
		return
	}
	cutoff := m.cfg.Clock.Now().Add(-m.cfg.Retention)
	// Records of processes that ended are kept only as long as the processes stay listed.
	if n, err := m.cfg.Store.DeleteEndedProcesses(ctx, cutoff); err != nil {
		m.log.Warn("forget ended processes", "err", err)
	} else if n > 0 {
		m.log.Info("forgot the records of ended processes", "count", n)
	}
	recs, err := m.cfg.Store.ListProcesses(ctx, "", cutoff)
	if err != nil {
		m.log.Error("list recorded processes to adopt", "err", err)
		return
	}
	bySandbox := map[string][]store.Process{}
	for _, rec := range recs {
		bySandbox[rec.Sandbox] = append(bySandbox[rec.Sandbox], rec)
	}
	for name, recs := range bySandbox {
		sb, err := m.cfg.Sandboxes.Lookup(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			m.adoptRecords(ctx, store.Sandbox{Name: name}, recs, &fate{StateLost, "its sandbox is gone"})
		case err != nil:
			m.log.Warn("adopt processes", "sandbox", name, "err", err)
		default:
			if fa, ok := sandboxFate(sb); ok {
				m.adoptRecords(ctx, sb, recs, &fa)
				continue
			}
			if err := m.owned(ctx, name); err != nil {
				continue // another replica follows them (or will, once it can say so)
			}
			m.adoptRecords(ctx, sb, recs, nil)
		}
	}
}

// adoptSandbox adopts the processes of sb that the records say run and that this control
// plane does not follow (it was restarted, or the process was started by another instance),
// and lists again those that ended within Retention.
func (m *Manager) adoptSandbox(ctx context.Context, sb store.Sandbox) {
	if m.cfg.Store == nil {
		return
	}
	recs, err := m.cfg.Store.ListProcesses(ctx, sb.Name, m.cfg.Clock.Now().Add(-m.cfg.Retention))
	if err != nil {
		m.log.Warn("list recorded processes to adopt", "sandbox", sb.Name, "err", err)
		return
	}
	var fa *fate
	if f, ok := sandboxFate(sb); ok {
		fa = &f
	}
	m.adoptRecords(ctx, sb, recs, fa)
}

// adoptRecords takes over each recorded process of sb that this Manager does not know yet.
// One whose record says it ended is listed as it ended. One that runs is followed, when sb
// runs with a daemon; when fa is set (sb is gone, destroyed or failed), it is ended with that
// fate instead. The record binds its tag to one process instance: the daemon's process of that
// tag must have the recorded pid. Any process can copy a tag (the daemon lists tags to
// whoever holds its token) and take it once the original ended, so a tag alone proves nothing;
// a pid the daemon gave the original cannot be chosen by the one who copies it.
func (m *Manager) adoptRecords(ctx context.Context, sb store.Sandbox, recs []store.Process, fa *fate) {
	var c *envd.Client
	if fa == nil && sb.DaemonURL != "" && sb.State == string(provider.StateRunning) {
		c, _ = m.cfg.Sandboxes.Daemon(sb)
	}
	for _, rec := range recs {
		m.mu.Lock()
		_, known := m.procs[rec.ID]
		known = known || m.startingIDs[rec.ID] // Start records it before it lists it
		m.mu.Unlock()
		switch {
		case known:
		case rec.State != string(StateRunning):
			m.keepEnded(rec)
		case !rec.Daemon:
		case fa != nil:
			m.endUnfollowed(rec, fa.state, fa.why)
		case c == nil:
			// paused, or its daemon not reachable yet: adopted when it is listed again
		default:
			if id, ok := m.parseTag(rec.Tag, rec.TokenID, rec.Sandbox); !ok || id != rec.ID {
				m.log.Error("a process record's tag is not hangar's; not adopting it", "process", rec.ID, "sandbox", sb.Name)
				continue
			}
			if err := m.adoptOne(ctx, c, rec); err != nil {
				m.log.Warn("adopt process", "process", rec.ID, "sandbox", sb.Name, "err", err)
			}
		}
	}
}

// endUnfollowed records that the running process of rec ended (StateExited) or is lost, as
// hangar learns now, while nothing followed it, and lists it so, for Retention from now.
func (m *Manager) endUnfollowed(rec store.Process, state State, why string) {
	status := "unknown: " + why
	if state == StateLost {
		status = "lost: " + why
	}
	now := m.cfg.Clock.Now()
	code := -1
	m.endRecord(rec.ID, &envd.Exit{Code: code, Status: status}, now, -1)
	rec.State, rec.Status, rec.EndedAt = string(StateExited), status, now
	if state == StateExited {
		rec.ExitCode = &code
	}
	m.keepEnded(rec)
}

// keepEnded lists the process of rec, which ended, as its record says (until Retention after
// its end), unless this Manager knows it already. Nothing of its output is kept: its offsets
// start and end where the record's do, and a read from before gets a gap saying why.
func (m *Manager) keepEnded(rec store.Process) {
	pr := newProc(m.cfg.RingBytes)
	pr.id, pr.owner, pr.user, pr.grant, pr.sandbox, pr.tag = rec.ID, rec.TokenID, rec.User, rec.Grant, rec.Sandbox, rec.Tag
	pr.command, pr.cwd, pr.started, pr.pid = rec.Command, rec.Cwd, rec.StartedAt, rec.PID
	pr.daemon, pr.pty, pr.recorded, pr.f = rec.Daemon, rec.PTY, true, endedFollower{}
	pr.ring.startAt(rec.OutputEnd)
	pr.adoptedAt = rec.OutputEnd
	pr.lostNote = "hangar restarted (or another replica took over) since the process ended: its output is not kept"
	pr.state, pr.endedAt = StateExited, rec.EndedAt
	pr.exit = &envd.Exit{Code: -1, Status: rec.Status}
	if rec.ExitCode != nil {
		pr.exit.Code = *rec.ExitCode
	}
	if strings.HasPrefix(rec.Status, "lost:") {
		pr.state = StateLost
	}
	close(pr.exited)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, known := m.procs[rec.ID]; !known && !m.startingIDs[rec.ID] {
		m.procs[rec.ID] = pr
	}
}

// endedFollower is the follower of a process that ended before this Manager knew it: there is
// nothing to follow, and it takes no input or signal.
type endedFollower struct{}

func (endedFollower) follow(context.Context) {}
func (endedFollower) input(context.Context, store.Sandbox, []byte, bool) error {
	return ErrExited
}
func (endedFollower) signal(context.Context, store.Sandbox, envd.Signal) error { return nil }
func (endedFollower) resize(context.Context, store.Sandbox, PTYSize) error     { return ErrExited }
func (endedFollower) attached()                                                {}

// adoptOne reaches the recorded process by its tag and follows it, or records that it ended.
func (m *Manager) adoptOne(ctx context.Context, c *envd.Client, rec store.Process) error {
	// The daemon's stream outlives this request: its context is the Manager's.
	sctx, cancel := context.WithCancel(m.ctx)
	st, err := c.Connect(sctx, envd.ByTag(rec.Tag))
	if errors.Is(err, envd.ErrNotFound) {
		cancel()
		m.endUnfollowed(rec, StateExited, "it ended while hangar was not following it")
		return nil
	}
	if err != nil {
		cancel()
		return fmt.Errorf("connect to process %s: %w", rec.ID, err)
	}
	if st.PID() != rec.PID {
		st.Close()
		cancel()
		m.log.Warn("a process holds the tag of a recorded process but is not it; not adopting it",
			"process", rec.ID, "sandbox", rec.Sandbox, "recorded_pid", rec.PID, "pid", st.PID())
		m.endUnfollowed(rec, StateExited, fmt.Sprintf("it ended while hangar was not following it, and another process (pid %d) took its tag", st.PID()))
		return nil
	}
	fst, err := m.cfg.Streams.Open(context.WithoutCancel(ctx), followerOptions(principalOf(rec)))
	if err != nil {
		st.Close()
		cancel()
		return fmt.Errorf("follow process %s: %w", rec.ID, err)
	}
	pr := newProc(m.cfg.RingBytes)
	pr.id, pr.owner, pr.user, pr.grant, pr.sandbox, pr.tag = rec.ID, rec.TokenID, rec.User, rec.Grant, rec.Sandbox, rec.Tag
	pr.command, pr.cwd, pr.started, pr.pid = rec.Command, rec.Cwd, rec.StartedAt, rec.PID
	pr.adopted, pr.daemon, pr.pty, pr.recorded = true, true, rec.PTY, true
	// Its offsets carry on past every one given out before (the record's mark); what it
	// printed from there until now is lost, and a read from before says so.
	pr.ring.startAt(rec.OutputEnd)
	pr.adoptedAt, pr.mark = rec.OutputEnd, rec.OutputEnd
	pr.lostNote = "hangar was not following the process for a while (it restarted, or another replica took over): what it printed then is lost, and what it printed before is no longer kept"
	pr.f = m.daemonFollower(pr, st, cancel)
	m.mu.Lock()
	if _, known := m.procs[rec.ID]; known || m.startingIDs[rec.ID] { // adopted meanwhile by a concurrent request, or being started
		m.mu.Unlock()
		st.Close()
		cancel()
		fst.End(stream.ReasonDone)
		fst.Close()
		return nil
	}
	m.procs[rec.ID] = pr
	m.mu.Unlock()
	m.log.Info("adopted a background process", "process", rec.ID, "sandbox", rec.Sandbox, "pid", rec.PID)
	m.run(pr, pr.f, fst)
	return nil
}
