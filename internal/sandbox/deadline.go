package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
)

// A sandbox's lifetime (the E2B API's timeout): a deadline kept with the sandbox in the store, so
// a restarted control plane, or another replica, enforces it too; at the deadline the sandbox is
// destroyed, or paused when it asked for that. RunDeadlines does it.

// MaxTimeout is the longest a sandbox's time may be set to from now: E2B's own bound (24 hours,
// its Pro plan's).
const MaxTimeout = 24 * time.Hour

// Bounds of a sandbox's metadata, so that one request cannot make a row of any size.
const (
	maxMetadataEntries = 64
	maxMetadataKey     = 256
	maxMetadataValue   = 4 << 10
)

// dueBatch is how many due sandboxes one ExpireDue handles; the next round takes the rest.
const dueBatch = 64

// Owners says which replica acts on a sandbox when several share one database: the one holding
// its lease (the process manager's Owners has the same method). Nil in Config: this Manager acts
// on every sandbox.
type Owners interface {
	// Owner takes sandbox's lease when it is free (or expired) and reports whether it is mine.
	Owner(ctx context.Context, sandbox string) (url string, mine bool, err error)
}

func onTimeout(s string) string {
	if s == "" {
		return store.OnTimeoutKill
	}
	return s
}

// checkLifetime checks a request's timeout, what to do then, and metadata.
func checkLifetime(req CreateRequest) error {
	if req.Timeout < 0 || req.Timeout > MaxTimeout {
		return fmt.Errorf("%w: the timeout must be between 0 and %d seconds", ErrInvalid, int(MaxTimeout.Seconds()))
	}
	if req.OnTimeout != "" && req.OnTimeout != store.OnTimeoutKill && req.OnTimeout != store.OnTimeoutPause {
		return fmt.Errorf("%w: what happens at the timeout must be %s or %s, not %q", ErrInvalid, store.OnTimeoutKill, store.OnTimeoutPause, req.OnTimeout)
	}
	if len(req.Metadata) > maxMetadataEntries {
		return fmt.Errorf("%w: metadata has %d entries; at most %d are kept", ErrInvalid, len(req.Metadata), maxMetadataEntries)
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return fmt.Errorf("%w: a metadata key must have 1 to %d bytes and its value at most %d", ErrInvalid, maxMetadataKey, maxMetadataValue)
		}
	}
	return nil
}

// SetEnd sets when the sandbox ref's time is up (zero: never) and returns it as it now is. A
// token bound to the sandbox may give it more time, never less (less would destroy it, which
// such a token may not do).
func (m *Manager) SetEnd(ctx context.Context, p auth.Principal, ref string, end time.Time) (Sandbox, error) {
	sb, err := m.Get(ctx, p, ref)
	if err != nil {
		return view(sb), err
	}
	if sb.State == string(provider.StateDestroyed) || sb.State == string(provider.StateFailed) {
		return view(sb), fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.Name, sb.State)
	}
	if !end.IsZero() && end.After(m.cfg.Clock.Now().Add(MaxTimeout)) {
		return view(sb), fmt.Errorf("%w: the timeout must be at most %d seconds", ErrInvalid, int(MaxTimeout.Seconds()))
	}
	if p.Sandbox != "" && !end.IsZero() && (sb.EndAt.IsZero() || end.Before(sb.EndAt)) {
		return view(sb), fmt.Errorf("%w: a token bound to a sandbox may give it more time, not less", ErrForbidden)
	}
	end = end.Truncate(time.Millisecond)
	if err := m.cfg.Store.SetSandboxEnd(ctx, sb.Name, sb.CreatedAt, end); err != nil {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return view(sb), fmt.Errorf("%w: sandbox %s was destroyed meanwhile", ErrState, sb.Name)
		}
		return view(sb), err
	}
	sb.EndAt = end
	return view(sb), nil
}

// Expired is what ExpireDue did to one sandbox whose time was up.
type Expired struct {
	Name   string
	Action string // store.OnTimeoutKill or store.OnTimeoutPause
	Err    error  // nil: done
}

// ExpireDue destroys (or pauses) the running sandboxes whose time is up, those whose lease this
// replica holds when there are several, and says what it did. Its own failures are logged and
// tried again at the next round; a sandbox it paused has no deadline any more (E2B's connect
// resumes it with a new one).
func (m *Manager) ExpireDue(ctx context.Context) ([]Expired, error) {
	due, err := m.cfg.Store.DueSandboxes(ctx, m.cfg.Clock.Now(), dueBatch)
	if err != nil {
		return nil, fmt.Errorf("list due sandboxes: %w", err)
	}
	var out []Expired
	for _, sb := range due {
		if m.cfg.Owners != nil {
			_, mine, err := m.cfg.Owners.Owner(ctx, sb.Name)
			if err != nil || !mine {
				continue // its owner replica acts; or the next round, once the store answers
			}
		}
		e := Expired{Name: sb.Name, Action: onTimeout(sb.OnTimeout)}
		if e.Action == store.OnTimeoutPause {
			if _, e.Err = m.transitionStored(ctx, sb, provider.StateRunning, "pause", m.pause); e.Err == nil {
				e.Err = m.cfg.Store.SetSandboxEnd(ctx, sb.Name, sb.CreatedAt, time.Time{})
			} else if errors.Is(e.Err, provider.ErrUnsupported) {
				// Its provider cannot pause (kubernetes): its time is up all the same.
				m.log.Warn("a sandbox's time is up and its provider cannot pause it: destroyed instead", "sandbox", sb.Name, "provider", sb.Provider)
				e.Action, e.Err = store.OnTimeoutKill, m.destroy(ctx, sb)
			}
		} else {
			e.Err = m.destroy(ctx, sb)
		}
		if e.Err != nil {
			m.log.Warn("a sandbox's time is up, and it could not be ended; trying again", "sandbox", sb.Name, "action", e.Action, "err", e.Err)
		} else {
			m.log.Info("a sandbox's time is up", "sandbox", sb.Name, "owner", sb.Owner, "action", e.Action, "end", sb.EndAt)
		}
		out = append(out, e)
	}
	return out, nil
}

// RunDeadlines calls ExpireDue every interval (1 s when 0) on the Manager's clock until ctx
// ends: a sandbox outlives its time by at most about that, plus the provider's destroy.
func (m *Manager) RunDeadlines(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := m.cfg.Clock.NewTicker(interval, "sandbox", "deadlines")
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := m.ExpireDue(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("look for sandboxes whose time is up", "err", err)
			}
		}
	}
}
