package stream

import (
	"context"
	"time"
)

// UpdateEvery is the window of the streams that say "something new exists" (Options.Coalesce):
// the spec's "notifications/resources/updated at most every 250 ms per URI".
const UpdateEvery = 250 * time.Millisecond

// nextCoalesced is Next for a stream opened with Options.Coalesce, whose items each say "up
// to here" (the newest seq of a session's events, say): the first batch is handed out at once;
// one that comes sooner than Coalesce after the one before waits for the rest of that window,
// and everything queued by then is merged into its newest item. So the writer says "it
// changed" at most once per window, and that once covers all that happened meanwhile. The
// wait ends early, with the stream's end, when the stream is ended or ctx ends. Such a stream
// is never written through (render.go): every item passes here.
func (s *Stream) nextCoalesced(ctx context.Context, idle time.Duration) ([]Item, error) {
	items, err := s.next(ctx, idle)
	if err != nil || len(items) == 0 {
		return items, err
	}
	if wait := s.untilDue(); wait > 0 {
		t := s.r.cfg.Clock.NewTimer(wait, "stream", "coalesce")
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.Done():
			return nil, &Ended{Reason: s.Reason()}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		items = s.batch(items[len(items)-1]) // and what came while it waited
	}
	s.lastBatch.Store(s.r.cfg.Clock.Now().UnixNano())
	return items[len(items)-1:], nil
}

// Due waits until the writer of a coalesced stream would take an item at once: until Coalesce
// has passed since it last took one (at once if it has, or if it took none yet). A producer
// that reads what it sends (a store, a watch) waits here before its last read, so that what it
// sends is the newest when it goes out and nothing it read during the window reaches the
// writer after the window's one batch. It reports false when the stream ended or ctx ended
// first. For a stream without Coalesce it returns true at once.
func (s *Stream) Due(ctx context.Context) bool {
	wait := s.untilDue()
	if wait <= 0 {
		return true
	}
	t := s.r.cfg.Clock.NewTimer(wait, "stream", "coalesce")
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.Done():
	case <-ctx.Done():
	}
	return false
}

// untilDue is how long until Coalesce has passed since the writer's last batch (<= 0: it has,
// or there was none, or the stream does not coalesce).
func (s *Stream) untilDue() time.Duration {
	last := s.lastBatch.Load()
	if last == 0 || s.opts.Coalesce <= 0 {
		return 0
	}
	return time.Unix(0, last).Add(s.opts.Coalesce).Sub(s.r.cfg.Clock.Now())
}
