package turns

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// SessionUpdates opens a stream (kind events) that tells p when events are appended to the
// session ref (its name or id), without the events themselves: what a subscription (MCP's
// resources/subscribe) renders. Each item's ID is the session's newest seq, and the stream is
// coalesced (stream.UpdateEvery): its writer hears at most once per window. The session is
// resolved once, for p (ErrNotFound when p may not see it, as for every other read), and each
// time the stream's feeder wakes it checks again that p may still see it, so a subscriber
// never hears of a session that is not (or is no longer) theirs, even if its name now means
// another one: then the stream ends (ReasonDone). It ends too with its sandbox's destruction,
// pause or failure, p's revocation, its lifetime and shutdown. The caller renders it and must
// Close it.
func (s *Service) SessionUpdates(ctx context.Context, p auth.Principal, ref string) (*stream.Stream, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	return s.updates(ctx, p, se.Sandbox, sessionKey(se.ID), se.LastSeq, func(ctx context.Context) (int64, error) {
		now, err := s.getSession(ctx, p, se.ID)
		return now.LastSeq, err
	})
}

// JobUpdates is SessionUpdates for the job id; its items' IDs are job seqs.
func (s *Service) JobUpdates(ctx context.Context, p auth.Principal, id string) (*stream.Stream, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return s.updates(ctx, p, j.Sandbox, jobKey(j.ID), j.LastSeq, func(ctx context.Context) (int64, error) {
		now, err := s.getJob(ctx, p, j.ID)
		return now.LastSeq, err
	})
}

// updates opens the stream and starts its feeder; read is the newest seq, if p may still see
// it; last is the newest when the stream was asked for (what came before is not news).
func (s *Service) updates(ctx context.Context, p auth.Principal, sandbox, key string, last int64,
	read func(context.Context) (int64, error)) (*stream.Stream, error) {
	if s.cfg.Streams == nil {
		return nil, fmt.Errorf("follow updates: no stream registry configured")
	}
	st, err := s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindEvents, Principal: p, Sandbox: sandbox, Lifetime: true, Unpaced: true,
		Coalesce: stream.UpdateEvery})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		st.End(stream.ReasonShutdown)
		st.Close()
		return nil, fmt.Errorf("follow updates: %w", stream.ErrShuttingDown)
	}
	s.wg.Add(1) // under mu, so Close's Wait never races it
	go func() {
		defer s.wg.Done()
		s.feedUpdates(st, key, last, read)
	}()
	return st, nil
}

// feedUpdates sends the newest seq each time it moves past last, until the stream ends, p
// may no longer see what it follows, or the Service closes. It takes the notifier's channel
// before it reads the store, so an append between the read and the wait still wakes it.
func (s *Service) feedUpdates(st *stream.Stream, key string, last int64, read func(context.Context) (int64, error)) {
	for {
		woken, release := s.woken.wait(key)
		now, err := read(s.ctx)
		if err != nil {
			release()
			s.endUpdates(st, key, err)
			return
		}
		if now > last {
			// Within the stream's window, wait for its end and read again: the one update
			// then covers all that was recorded meanwhile.
			if !st.Due(s.ctx) {
				release()
				s.endUpdates(st, key, s.ctx.Err())
				return
			}
			if now, err = read(s.ctx); err != nil {
				release()
				s.endUpdates(st, key, err)
				return
			}
			last = now
			st.Send(stream.Item{ID: strconv.FormatInt(now, 10)})
		}
		select {
		case <-woken:
			release()
		case <-st.Done():
			release()
			return
		case <-s.ctx.Done():
			release()
			st.End(stream.ReasonShutdown)
			return
		}
	}
}

// endUpdates ends an updates stream whose read failed, or whose wait did (err nil: the
// stream ended).
func (s *Service) endUpdates(st *stream.Stream, key string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		st.End(stream.ReasonDone) // deleted, or no longer p's: nothing more to tell
	case s.ctx.Err() != nil:
		st.End(stream.ReasonShutdown)
	default:
		s.log.Error("follow updates", "key", key, "err", err)
		st.End(stream.ReasonError)
	}
}
