package process

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Owners says which replica follows a sandbox's processes when several hangar replicas share
// one database (docs/replicas.md): the one holding the sandbox's lease. Nil in Config: this
// Manager is the only one, and follows every process.
type Owners interface {
	// Owner takes sandbox's lease when it is free (or expired) and reports mine; else url is
	// where the replica holding it is reached.
	Owner(ctx context.Context, sandbox string) (url string, mine bool, err error)
}

// ElsewhereError says that another replica follows the processes of a sandbox: a request
// about them is served there (REST forwards it to URL).
type ElsewhereError struct {
	Sandbox string
	URL     string // the owner replica's advertised URL
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("the processes of sandbox %s are followed by another hangar replica (%s); ask it, or try again", e.Sandbox, e.URL)
}

// Problem says to try again in a moment; where the other replica is reached stays in the log:
// it is an address inside the deployment, not the client's to know.
func (e *ElsewhereError) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeUnavailable, RetryAfter: time.Second,
		Message: fmt.Sprintf("The processes of sandbox %s are followed by another hangar replica just now; try again in a moment.", e.Sandbox)}
}

// UnstartedError is a start refused before it did anything in the sandbox, because this
// replica is shutting down (Err is, or wraps, stream.ErrShuttingDown): a replica that forwarded
// the request may send it to the sandbox's next owner rather than pass the refusal on.
type UnstartedError struct{ Err error }

func (e *UnstartedError) Error() string { return e.Err.Error() }
func (e *UnstartedError) Unwrap() error { return e.Err }

// unstarted marks err, a start's refusal before anything was done, as an UnstartedError when
// it is the shutdown's.
func unstarted(err error) error {
	if errors.Is(err, stream.ErrShuttingDown) {
		return &UnstartedError{Err: err}
	}
	return err
}

// owned returns nil when this Manager follows the processes of sb, else an *ElsewhereError (or
// the error of asking).
func (m *Manager) owned(ctx context.Context, sandbox string) error {
	if m.cfg.Owners == nil {
		return nil
	}
	url, mine, err := m.cfg.Owners.Owner(ctx, sandbox)
	if err != nil {
		return err
	}
	if !mine {
		return &ElsewhereError{Sandbox: sandbox, URL: url}
	}
	return nil
}

// ownedToStart checks that this Manager follows the processes of sandbox, as owned, and counts
// a start under way there (startEnded ends it), for Release to wait for. It returns how many
// times the sandbox was released so far: a Release that comes during the start (and waits for
// it) changes that. One that came between the check and the count did not wait, and the new
// owner may have adopted the sandbox's processes already, before this one's record existed: it
// asks again, and the answer is now where they are.
func (m *Manager) ownedToStart(ctx context.Context, sandbox string) (uint64, error) {
	for {
		m.mu.Lock()
		released := m.releases[sandbox]
		m.mu.Unlock()
		if err := m.owned(ctx, sandbox); err != nil {
			return 0, err
		}
		m.mu.Lock()
		if m.releases[sandbox] == released {
			m.startingIn[sandbox]++
			m.mu.Unlock()
			return released, nil
		}
		m.mu.Unlock()
	}
}

// startEnded ends a start that ownedToStart counted.
func (m *Manager) startEnded(sandbox string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.startingIn[sandbox]--; m.startingIn[sandbox] <= 0 {
		delete(m.startingIn, sandbox)
	}
	m.startDone.Broadcast()
}

// Elsewhere says where the processes of the sandbox ref (as p sees it) are followed: "" when
// here, else the URL of the replica that follows them. A transport forwards the request there.
func (m *Manager) Elsewhere(ctx context.Context, p auth.Principal, ref string) (string, error) {
	sb, err := m.cfg.Sandboxes.Get(ctx, p, ref)
	if err != nil {
		return "", err
	}
	var e *ElsewhereError
	if err := m.owned(ctx, sb.Name); errors.As(err, &e) {
		return e.URL, nil
	} else if err != nil {
		return "", err
	}
	return "", nil
}

// AdoptSandbox follows the processes that the records say run in the sandbox name and that
// this Manager does not follow yet: what a replica does when it gains a sandbox's lease.
func (m *Manager) AdoptSandbox(ctx context.Context, name string) {
	sb, err := m.cfg.Sandboxes.Lookup(ctx, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("adopt the processes of a sandbox", "sandbox", name, "err", err)
		}
		return
	}
	m.adoptSandbox(ctx, sb)
}

// Release stops following the processes of the sandbox name and forgets them, leaving their
// records as they are: another replica holds the sandbox's lease now and follows them. Clients
// attached here are ended (shutdown): they reattach through the new owner. It waits for the
// starts under way in the sandbox, so that each is recorded (for the new owner to adopt) and
// let go of here.
func (m *Manager) Release(name string) {
	m.mu.Lock()
	m.releases[name]++
	for m.startingIn[name] > 0 {
		m.startDone.Wait()
	}
	var gone []*proc
	for id, pr := range m.procs {
		if pr.sandbox == name {
			gone = append(gone, pr)
			delete(m.procs, id)
		}
	}
	m.mu.Unlock()
	for _, pr := range gone {
		pr.mu.Lock()
		for s := range pr.subs {
			s.End(stream.ReasonShutdown)
		}
		pr.subs = map[*stream.Stream]struct{}{}
		pr.released = true
		stop := pr.stop
		pr.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	if len(gone) > 0 {
		m.log.Info("stopped following the processes of a sandbox another replica owns now", "sandbox", name, "count", len(gone))
	}
}

// runningElsewhere counts the processes under the keys tok and usr (see limitKeys) that the
// records say run and that this Manager does not follow: with several replicas, those the
// others follow, so MaxPerToken and MaxPerUser hold across them (two starts on two replicas
// at the same moment may still pass them by one). Alone both are 0: every running process is
// followed here.
func (m *Manager) runningElsewhere(ctx context.Context, tok, usr string) (byToken, byUser int, err error) {
	if m.cfg.Owners == nil || m.cfg.Store == nil {
		return 0, 0, nil
	}
	recs, err := m.cfg.Store.ListRunningProcesses(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("count the running processes of the token and its user: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rec := range recs {
		if _, here := m.procs[rec.ID]; here {
			continue
		}
		t, u := limitKeys(rec.TokenID, rec.Grant, rec.User)
		if t == tok {
			byToken++
		}
		if usr != "" && u == usr {
			byUser++
		}
	}
	return byToken, byUser, nil
}

// ofUserElsewhere lists what the records say of user's processes that other replicas follow
// (running, or ended within Retention); none alone. Their output offsets are not known here.
func (m *Manager) ofUserElsewhere(user string) []Info {
	if m.cfg.Owners == nil || m.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	recs, err := m.cfg.Store.ListUserProcesses(ctx, user, m.cfg.Clock.Now().Add(-m.cfg.Retention))
	if err != nil {
		m.log.Warn("list the processes other replicas follow", "user", user, "err", err)
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Info
	for _, rec := range recs {
		if _, here := m.procs[rec.ID]; here {
			continue
		}
		i := Info{ID: rec.ID, Sandbox: rec.Sandbox, Owner: rec.TokenID, User: rec.User, Command: rec.Command, Cwd: rec.Cwd, PID: rec.PID,
			State: StateRunning, Daemon: rec.Daemon, PTY: rec.PTY, StartedAt: rec.StartedAt, EndedAt: rec.EndedAt, Status: rec.Status}
		if rec.State != "running" {
			i.State, i.ExitCode = StateExited, rec.ExitCode
			if strings.HasPrefix(rec.Status, "lost:") {
				i.State, i.ExitCode = StateLost, nil
			}
		}
		out = append(out, i)
	}
	return out
}
