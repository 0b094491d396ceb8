package process

import (
	"context"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// AdoptAll follows again every process that the records say runs, in every running sandbox:
// call it at start, so a process whose token is revoked after a restart is killed like any
// other (its follower's stream is rechecked), and admins see every process. A record whose
// sandbox is gone is ended; one in a paused sandbox is adopted once the sandbox runs and is
// listed. Records of processes that ended more than Retention ago are deleted. Without a
// Store it does nothing.
func (m *Manager) AdoptAll(ctx context.Context) {
	if m.cfg.Store == nil {
		return
	}
	// Records of processes that ended are kept only as long as the processes stay listed.
	if n, err := m.cfg.Store.DeleteEndedProcesses(ctx, m.cfg.Clock.Now().Add(-m.cfg.Retention)); err != nil {
		m.log.Warn("forget ended processes", "err", err)
	} else if n > 0 {
		m.log.Info("forgot the records of ended processes", "count", n)
	}
	recs, err := m.cfg.Store.ListRunningProcesses(ctx)
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
			m.endRecords(recs, "unknown: its sandbox is gone")
		case err != nil:
			m.log.Warn("adopt processes", "sandbox", name, "err", err)
		case sb.State == string(provider.StateDestroyed) || sb.State == string(provider.StateFailed):
			m.endRecords(recs, "unknown: its sandbox is "+sb.State)
		default:
			if err := m.owned(ctx, name); err != nil {
				continue // another replica follows them (or will, once it can say so)
			}
			m.adoptRecords(ctx, sb, recs)
		}
	}
}

func (m *Manager) endRecords(recs []store.Process, status string) {
	for _, rec := range recs {
		m.endRecord(rec.ID, &envd.Exit{Code: -1, Status: status})
	}
}

// adoptSandbox adopts the processes of sb that the records say run and that this control
// plane does not follow (it was restarted, or the process was started by another instance).
func (m *Manager) adoptSandbox(ctx context.Context, sb store.Sandbox) {
	if m.cfg.Store == nil || sb.DaemonURL == "" || sb.State != string(provider.StateRunning) {
		return
	}
	recs, err := m.cfg.Store.ListRunningProcesses(ctx)
	if err != nil {
		m.log.Warn("list recorded processes to adopt", "sandbox", sb.Name, "err", err)
		return
	}
	var mine []store.Process
	for _, rec := range recs {
		if rec.Sandbox == sb.Name {
			mine = append(mine, rec)
		}
	}
	m.adoptRecords(ctx, sb, mine)
}

// adoptRecords adopts each recorded process of sb that this Manager does not follow yet. The
// record binds its tag to one process instance: the daemon's process of that tag must have the
// recorded pid. Any process can copy a tag (the daemon lists tags to whoever holds its token)
// and take it once the original ended, so a tag alone proves nothing; a pid the daemon gave the
// original cannot be chosen by the one who copies it.
func (m *Manager) adoptRecords(ctx context.Context, sb store.Sandbox, recs []store.Process) {
	if sb.DaemonURL == "" || sb.State != string(provider.StateRunning) {
		return
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return
	}
	for _, rec := range recs {
		m.mu.Lock()
		_, known := m.procs[rec.ID]
		m.mu.Unlock()
		if known || !rec.Daemon {
			continue
		}
		if id, ok := m.parseTag(rec.Tag, rec.TokenID, rec.Sandbox); !ok || id != rec.ID {
			m.log.Error("a process record's tag is not hangar's; not adopting it", "process", rec.ID, "sandbox", sb.Name)
			continue
		}
		if err := m.adoptOne(ctx, c, rec); err != nil {
			m.log.Warn("adopt process", "process", rec.ID, "sandbox", sb.Name, "err", err)
		}
	}
}

// adoptOne reaches the recorded process by its tag and follows it, or records that it ended.
func (m *Manager) adoptOne(ctx context.Context, c *envd.Client, rec store.Process) error {
	// The daemon's stream outlives this request: its context is the Manager's.
	sctx, cancel := context.WithCancel(m.ctx)
	st, err := c.Connect(sctx, envd.ByTag(rec.Tag))
	if errors.Is(err, envd.ErrNotFound) {
		cancel()
		m.endRecord(rec.ID, &envd.Exit{Code: -1, Status: "unknown: it ended while hangar was not following it"})
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
		m.endRecord(rec.ID, &envd.Exit{Code: -1, Status: fmt.Sprintf("unknown: it ended while hangar was not following it, and another process (pid %d) took its tag", st.PID())})
		return nil
	}
	fst, err := m.cfg.Streams.Open(context.WithoutCancel(ctx), followerOptions(principalOf(rec)))
	if err != nil {
		st.Close()
		cancel()
		return fmt.Errorf("follow process %s: %w", rec.ID, err)
	}
	pr := newProc(m.cfg.RingBytes)
	pr.id, pr.owner, pr.user, pr.sandbox, pr.tag = rec.ID, rec.TokenID, rec.User, rec.Sandbox, rec.Tag
	pr.command, pr.cwd, pr.started, pr.pid = rec.Command, rec.Cwd, rec.StartedAt, rec.PID
	pr.adopted, pr.daemon, pr.pty, pr.recorded = true, true, rec.PTY, true
	pr.f = m.daemonFollower(pr, st, cancel)
	m.mu.Lock()
	if _, known := m.procs[rec.ID]; known { // adopted meanwhile by a concurrent request
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
