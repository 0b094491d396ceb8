package turns

import (
	"context"
	"errors"

	"github.com/hangar-dev/hangar/internal/auth"
)

// Changes tells one principal when events are appended to one session or job: what a
// subscription (MCP's resources/subscribe) needs, without reading the events themselves. It
// is resolved once, for the principal that asked, and every Wait checks again that the
// principal may still see it, so a subscriber never hears of a session or job that is not
// (or is no longer) theirs, even if its name now means another one.
type Changes struct {
	// ID is the session's or job's id; Sandbox is the sandbox it runs in.
	ID, Sandbox string
	// Last is the seq of its newest event when Changes was made (a job seq for a job).
	Last int64

	s    *Service
	key  string                                            // the notifier's key
	read func(ctx context.Context) (last int64, err error) // the newest seq, if p may still see it
}

// SessionChanges resolves the session ref (its name or id) for p: ErrNotFound when p may not
// see it, as for every other read.
func (s *Service) SessionChanges(ctx context.Context, p auth.Principal, ref string) (*Changes, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	c := &Changes{ID: se.ID, Sandbox: se.Sandbox, Last: se.LastSeq, s: s, key: sessionKey(se.ID)}
	c.read = func(ctx context.Context) (int64, error) {
		now, err := s.getSession(ctx, p, se.ID)
		if err != nil {
			return 0, err
		}
		return now.LastSeq, nil
	}
	return c, nil
}

// JobChanges resolves the job id for p (ErrNotFound when p may not see it); its seqs are job
// seqs.
func (s *Service) JobChanges(ctx context.Context, p auth.Principal, id string) (*Changes, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return nil, err
	}
	c := &Changes{ID: j.ID, Sandbox: j.Sandbox, Last: j.LastSeq, s: s, key: jobKey(j.ID)}
	c.read = func(ctx context.Context) (int64, error) {
		now, err := s.getJob(ctx, p, j.ID)
		if err != nil {
			return 0, err
		}
		return now.LastSeq, nil
	}
	return c, nil
}

// ErrClosed means the Service was closed while a Wait waited.
var ErrClosed = errors.New("turns service closed")

// Wait returns the newest seq once it is past after: at once if it is already, else at the
// next append that moves it. It takes the notifier's channel before it reads the store, so an
// append between the read and the wait still wakes it. It fails with ErrNotFound once the
// principal may no longer see the session or job (deleted, its owner changed), with ctx's
// error when ctx ends, and with ErrClosed when the Service closes.
func (c *Changes) Wait(ctx context.Context, after int64) (int64, error) {
	for {
		woken, release := c.s.woken.wait(c.key)
		last, err := c.read(ctx)
		if err != nil || last > after {
			release()
			return last, err
		}
		select {
		case <-woken:
			release()
		case <-ctx.Done():
			release()
			return 0, ctx.Err()
		case <-c.s.ctx.Done():
			release()
			return 0, ErrClosed
		}
	}
}
