package watch

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
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
	if s.cfg.Streams == nil {
		return nil, stream.ErrShuttingDown
	}
	w, err := s.Open(ctx, p, ref, dir, recursive)
	if err != nil {
		return nil, err
	}
	st, err := s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindWatch, Principal: p, Sandbox: w.Sandbox, Lifetime: true, Unpaced: true})
	if err != nil {
		w.Close()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer w.Close()
		s.feed(st, w, since)
	}()
	return st, nil
}

// feed sends w's events after last to st as they come, until either ends.
func (s *Service) feed(st *stream.Stream, w *Watch, last int64) {
	for {
		changed := w.Changed()
		evs, next, gap := w.Read(last)
		if gap != nil {
			data, _ := json.Marshal(gap)
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
		if err := w.Err(); err != nil {
			if s.ctx.Err() != nil {
				st.End(stream.ReasonShutdown)
			} else {
				s.log.Info("a watch ended", "sandbox", w.Sandbox, "dir", w.Dir, "err", err)
				st.End(stream.ReasonError)
			}
			return
		}
		select {
		case <-changed:
		case <-st.Done():
			return
		case <-s.ctx.Done():
			st.End(stream.ReasonShutdown)
			return
		}
	}
}
