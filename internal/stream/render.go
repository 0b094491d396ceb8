package stream

import (
	"context"
	"errors"
	"io"
	"time"
)

// A Render loop is a stream's one writer. Between it and a producer that serves only this
// stream (SendWait), the queue costs a hand-off per item: the producer wakes the writer's
// goroutine, which renders and writes. When the writer is waiting with nothing queued, nothing
// it took still unwritten, and the pace allows the item at once, SendWait instead writes the
// item itself, on the producer's goroutine ("write-through"): one goroutine from the
// producer's read to the client's write, without the hand-off (0.05 ms a line on a small
// machine: bench/README.md). Otherwise the item is queued as before, so order, pacing, the
// byte cap and the queue's bound hold either way.

// Write renders and writes a batch of a stream's items to its client; an empty batch is a
// keep-alive. It is called by one goroutine at a time: Render's, or a producer's in SendWait.
// When it fails it ends the stream itself (with the reason the failure means: ReasonSlow,
// ReasonClient) and returns an error.
type Write func(items []Item) error

// Render is the writer's loop: it writes what the stream gives with write, in order, and
// write(nil) whenever idle passed with nothing to send (idle <= 0: never), until the stream
// finishes (ReasonDone) or ends, and returns why. A ctx that ends (the client went away) ends
// the stream with ReasonClient. While Render runs, SendWait may write through (see above);
// Render returns only once no such write is under way, so the caller may write to the client
// after it.
func (s *Stream) Render(ctx context.Context, idle time.Duration, write Write) Reason {
	s.q.Lock()
	s.write = write
	s.q.Unlock()
	defer s.stopWriteThrough()
	for {
		items, err := s.Next(ctx, idle)
		var ended *Ended
		switch {
		case errors.Is(err, io.EOF):
			return ReasonDone
		case errors.As(err, &ended):
			return ended.Reason
		case err != nil:
			s.End(ReasonClient)
			return ReasonClient
		}
		s.wmu.Lock()
		werr := write(items)
		s.wmu.Unlock()
		s.q.Lock()
		s.taken = false
		s.q.Unlock()
		if werr != nil {
			return s.Reason()
		}
	}
}

// stopWriteThrough lets no more items through and waits for a write-through under way.
func (s *Stream) stopWriteThrough() {
	s.q.Lock()
	s.write = nil
	done := s.throughDone
	s.q.Unlock()
	if done != nil {
		<-done
	}
}

// writeThrough writes it on the caller's goroutine when Render waits with nothing queued or
// in hand and the pace and the byte cap let it pass at once. handled is false when it did
// not, and the item is to be queued; ok is false when the write failed (the stream ended).
func (s *Stream) writeThrough(it Item) (handled, ok bool) {
	s.q.Lock()
	if s.write == nil || s.opts.Coalesce > 0 || s.taken || s.throughDone != nil || s.reason != "" || s.q.Closed() || s.q.Len() > 0 || s.capped || it.Final ||
		len(it.Data) > s.chunk || (s.limiter != nil && s.accepted+int64(len(it.Data)) > s.r.cfg.MaxBytes) ||
		(s.limiter != nil && !s.limiter.AllowN(s.r.cfg.Clock.Now(), int(cost(it)))) {
		s.q.Unlock()
		return false, false
	}
	write, done := s.write, make(chan struct{})
	s.throughDone = done
	s.accepted += int64(len(it.Data))
	s.countLocked(it)
	s.q.Touch()
	s.through[0] = it
	s.q.Unlock()

	s.wmu.Lock()
	err := write(s.through[:])
	s.wmu.Unlock()

	s.q.Lock()
	s.through[0] = Item{}
	s.throughDone = nil
	close(done)
	s.q.Unlock()
	return true, err == nil
}
