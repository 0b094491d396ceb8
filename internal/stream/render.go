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
//
// One lock decides who writes: Stream.wmu. Render holds it from the start, through each
// batch it takes and writes, and lets it go only while it waits with nothing taken; a
// producer writes through only when it gets wmu at once (TryLock: a producer never waits for
// the writer) and then finds, under mu, Render running and nothing queued. So an item queued
// before a write-through is written before it, one queued after it after it, and two writes
// never overlap.

// Write renders and writes a batch of a stream's items to its client; an empty batch is a
// keep-alive. It is called by one goroutine at a time: Render's, or a producer's in SendWait.
// When it fails it ends the stream itself (with the reason the failure means: EndSlow with
// SlowWriteTimeout, End with ReasonClient) and returns an error.
type Write func(items []Item) error

// Render is the writer's loop: it writes what the stream gives with write, in order, and
// write(nil) whenever idle passed with nothing to send (idle <= 0: never), until the stream
// finishes (ReasonDone) or ends, and returns why. A ctx that ends (the client went away) ends
// the stream with ReasonClient. While Render runs, SendWait may write through (see above);
// Render returns only once no such write is under way, so the caller may write to the client
// after it.
func (s *Stream) Render(ctx context.Context, idle time.Duration, write Write) Reason {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.rendering = true
	s.setWrite(write)
	defer func() {
		s.setWrite(nil)
		s.rendering = false
	}()
	return s.writeAll(ctx, idle, write)
}

// writeAll is the writer's loop of Render and of Produce's end: it writes what Next gives until
// the stream finishes or ends, and returns why.
func (s *Stream) writeAll(ctx context.Context, idle time.Duration, write Write) Reason {
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
		if err := write(items); err != nil {
			return s.Reason()
		}
	}
}

func (s *Stream) setWrite(write Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write = write
}

// writeThrough writes it on the caller's goroutine when Render waits with nothing queued or
// in hand and the pace and the byte cap let it pass at once. handled is false when it did
// not, and the item is to be queued; ok is false when the write failed (the stream ended).
// What is not needed to decide is done after the write, for a client waits for each line that
// comes this way: the byte counts, the time of the take, and the pace's charge of an item the
// stream's credit let through.
func (s *Stream) writeThrough(it Item) (handled, ok bool) {
	if !s.wmu.TryLock() { // Render has a batch in hand, or another producer writes
		return false, false
	}
	defer s.wmu.Unlock()
	write, charge := s.takeThrough(it)
	if write == nil {
		return false, false
	}
	s.through[0] = it
	err := write(s.through[:])
	s.through[0] = Item{}
	s.mu.Lock()
	s.countLocked(it)
	if s.limiter != nil {
		// The limiter holds at least the credit the item was let through on (it only gains
		// with time, and nothing else took from it: wmu is held), so this charge always passes.
		now := s.r.cfg.Clock.Now()
		if charge {
			s.limiter.AllowN(now, int(cost(it))) // takes the tokens; ReserveN would allocate
		}
		s.credit = s.limiter.TokensAt(now)
	}
	s.mu.Unlock()
	s.q.Touch()
	return true, err == nil
}

// takeThrough accepts it as taken by the writer (against the byte cap and the pace) and
// returns Render's write, when it may be written through (wmu is held); else it returns nil.
// charge says that the pace let it through on the stream's credit: it is to be charged to the
// limiter after its write.
func (s *Stream) takeThrough(it Item) (write Write, charge bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.write == nil || s.opts.Coalesce > 0 || s.reason != "" || s.capped || it.Final || len(it.Data) > s.chunk || !s.q.Empty() ||
		(s.limiter != nil && s.accepted+int64(len(it.Data)) > s.r.cfg.MaxBytes) {
		return nil, false
	}
	if s.limiter != nil {
		if c := float64(cost(it)); c <= s.credit {
			s.credit -= c
			charge = true
		} else if !s.limiter.AllowN(s.r.cfg.Clock.Now(), int(cost(it))) {
			return nil, false
		}
	}
	s.accepted += int64(len(it.Data))
	return s.write, charge
}
