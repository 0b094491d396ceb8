package stream

import (
	"context"
	"time"
)

// Produce is Render for a producer that serves only this stream and may run on its writer's
// goroutine: a streamed command, read by its client's own request. Render needs two
// goroutines, the producer's and the writer's, which waits in Next between items; Produce
// needs one, the caller's, which runs produce, and produce's SendWait writes each item before
// it returns: at once when the pace allows (as Render's write-through), else queued and written
// once the pace allows, the producer waiting meanwhile, as a slow terminal would make it wait.
// So a stream at rest holds no goroutine of its own (bench/README.md: goroutines a stream).
//
// write(nil) is a keep-alive, written from a timer whenever idle passed with nothing written
// (idle <= 0: never). The stream ending (End: a revoked token, a shutdown, a write that
// failed; ctx ending: ReasonClient) cancels produce's context, at once, with the cause
// cause(reason) gives; a nil cause leaves it (cause nil: always *Ended). Once
// produce returns, Produce finishes the stream, writes what is left and returns why it
// finished (ReasonDone) or ended, as Render does; no write is under way after, so the caller
// may write to the client. Not for a coalesced stream.
func (s *Stream) Produce(ctx context.Context, idle time.Duration, write Write, produce func(context.Context), cause func(Reason) error) Reason {
	pctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	if cause == nil {
		cause = func(r Reason) error { return &Ended{Reason: r} }
	}
	s.mu.Lock()
	s.write = write
	s.endProduce = func(r Reason) {
		if err := cause(r); err != nil {
			cancel(err)
		}
	}
	if s.reason != "" {
		s.endProduce(s.reason)
	}
	if idle > 0 {
		s.keepT = s.r.cfg.Clock.AfterFunc(idle, func() { s.keepAlive(idle) }, "stream", "keep-alive")
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.End(ReasonClient) })
	defer stop()

	produce(pctx)

	s.Finish()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	s.write, s.endProduce = nil, nil
	if s.keepT != nil {
		s.keepT.Stop()
		s.keepT = nil
	}
	s.mu.Unlock()
	return s.writeAll(ctx, 0, write) // finished: Next waits for nothing but the pace
}

// producing reports whether Produce runs the stream's producer.
func (s *Stream) producing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endProduce != nil
}

// sendProduced is SendWait under Produce for an item that could not be written through: it
// queues it a part at a time and writes each with what is queued once the pace allows,
// waiting for it. It reports false once the stream ended or ctx did.
func (s *Stream) sendProduced(ctx context.Context, it Item) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	write := s.write
	s.mu.Unlock()
	for first := true; first || len(it.Data) > 0; first = false {
		var part Item
		part, it = s.cut(it)
		if !s.enqueue(ctx, part, false) {
			return false
		}
		for s.queued() {
			items, err := s.Next(ctx, 0)
			if err != nil {
				return false
			}
			if write(items) != nil {
				return false
			}
		}
	}
	return true
}

// queued reports whether anything waits in the queue.
func (s *Stream) queued() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.Len() > 0
}

// keepAlive is Produce's keep-alive timer: it writes a keep-alive when nothing was written
// for idle, and arms itself again, until Produce is done. A write under way is not idle.
func (s *Stream) keepAlive(idle time.Duration) {
	if !s.wmu.TryLock() {
		s.rearm(idle)
		return
	}
	defer s.wmu.Unlock()
	s.mu.Lock()
	write, since, open := s.write, s.q.Idle(), s.reason == ""
	s.mu.Unlock()
	if write == nil || !open {
		return
	}
	if since < idle {
		s.rearm(idle - since)
		return
	}
	if write(nil) == nil {
		s.rearm(idle)
	}
}

// rearm arms the keep-alive timer again for d, unless Produce is done.
func (s *Stream) rearm(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keepT != nil && s.write != nil {
		s.keepT.Reset(d, "stream", "keep-alive")
	}
}
