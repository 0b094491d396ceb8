package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// EventGap is the item that says events were missed: Data {"from": N, "to": M}.
const EventGap = "gap"

// Stream opens a live stream (kind watch) of the changes under dir in the sandbox ref: the kept
// events after since first, then each as it happens, every one an item whose ID is its seq and
// whose Data is the event's JSON; a gap item when events after since are no longer kept. It
// counts as one of p's watches and one of p's streams; it ends with the stream's lifetime, the
// sandbox's destruction or pause, p's revocation, shutdown, or the daemon ending the watch
// (ReasonError). The caller renders it and must Close it.
func (s *Service) Stream(ctx context.Context, p auth.Principal, ref, dir string, recursive bool, since int64) (*stream.Stream, error) {
	w, st, err := s.open(ctx, p, ref, dir, recursive, 0)
	if err != nil {
		return nil, err
	}
	if err := s.startFeed(st, w, func() { s.feed(st, w, since) }); err != nil {
		return nil, err
	}
	return st, nil
}

// Updates opens a stream (kind watch) that tells p when something changes under dir in the
// sandbox ref, without the changes themselves: what a subscription (MCP's resources/subscribe)
// renders. Each item's ID is the newest change's seq (those before the call are not news), and
// the stream is coalesced (stream.UpdateEvery): its writer hears at most once per window. It
// holds one of p's watches and counts as one of p's streams, and ends as Stream does. The
// caller renders it and must Close it.
func (s *Service) Updates(ctx context.Context, p auth.Principal, ref, dir string, recursive bool) (*stream.Stream, error) {
	w, st, err := s.open(ctx, p, ref, dir, recursive, stream.UpdateEvery)
	if err != nil {
		return nil, err
	}
	last := w.Last()
	if err := s.startFeed(st, w, func() { s.feedUpdates(st, w, last) }); err != nil {
		return nil, err
	}
	return st, nil
}

// open holds a watch for p and opens its stream, coalesced when coalesce is set.
func (s *Service) open(ctx context.Context, p auth.Principal, ref, dir string, recursive bool, coalesce time.Duration) (*Watch, *stream.Stream, error) {
	if s.cfg.Streams == nil {
		return nil, nil, stream.ErrShuttingDown
	}
	w, err := s.Open(ctx, p, ref, dir, recursive)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindWatch, Principal: p, Sandbox: w.Sandbox, Lifetime: true, Unpaced: true,
		Coalesce: coalesce})
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	return w, st, nil
}

// feed sends w's events after last to st as they come, until either ends.
func (s *Service) feed(st *stream.Stream, w *Watch, last int64) {
	for {
		changed := w.Changed()
		evs, next, gap := w.Read(last)
		if gap != nil {
			data, _ := json.Marshal(wire.Gap{From: gap.From, To: gap.To})
			if !st.SendWait(s.ctx, stream.Item{Event: EventGap, Data: data, JSON: true}) {
				return
			}
		}
		for _, e := range evs {
			data, _ := json.Marshal(e)
			if !st.SendWait(s.ctx, stream.Item{ID: strconv.FormatInt(e.Seq, 10), Data: data, JSON: true}) {
				return
			}
		}
		last = next
		if !s.wait(st, w, changed) {
			return
		}
	}
}

// feedUpdates sends w's newest seq each time it moves past last, until either ends.
func (s *Service) feedUpdates(st *stream.Stream, w *Watch, last int64) {
	for {
		changed := w.Changed()
		if w.Last() > last {
			// Within the stream's window, wait for its end: the one update then covers all
			// that changed meanwhile.
			if !st.Due(s.ctx) {
				if s.ctx.Err() != nil {
					st.End(stream.ReasonShutdown)
				}
				return
			}
			last = w.Last()
			st.Send(stream.Item{ID: strconv.FormatInt(last, 10)})
		}
		if !s.wait(st, w, changed) {
			return
		}
	}
}

// wait waits for the next change of w, and reports false when there will be none for st: the
// daemon's watch ended (then st ends: ReasonError), st ended, or the Service closes.
func (s *Service) wait(st *stream.Stream, w *Watch, changed <-chan struct{}) bool {
	if err := w.Err(); err != nil {
		if s.ctx.Err() != nil {
			st.End(stream.ReasonShutdown)
		} else {
			s.log.Info("a watch ended", "sandbox", w.Sandbox, "dir", w.Dir, "err", err)
			st.End(stream.ReasonError)
		}
		return false
	}
	select {
	case <-changed:
		return true
	case <-st.Done():
		return false
	case <-s.ctx.Done():
		st.End(stream.ReasonShutdown)
		return false
	}
}

// startFeed starts a stream's feeder, which closes w when it returns; once the Service is closed
// it starts none, and closes w and st. wg.Add is under mu, so Close's Wait never races it.
func (s *Service) startFeed(st *stream.Stream, w *Watch, feed func()) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.Close() // takes mu
		st.End(stream.ReasonShutdown)
		st.Close()
		return fmt.Errorf("watch: %w", stream.ErrShuttingDown)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer w.Close()
		feed()
	}()
	return nil
}
