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
	if wait := s.lastBatch.Add(s.opts.Coalesce).Sub(s.r.cfg.Clock.Now()); !s.lastBatch.IsZero() && wait > 0 {
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
	s.lastBatch = s.r.cfg.Clock.Now()
	return items[len(items)-1:], nil
}
