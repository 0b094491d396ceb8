package stream

import (
	"context"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
)

// Item is one message of a stream. What Event and ID mean is the transport's business.
type Item struct {
	Event string // e.g. "stdout", "stderr"; EventCapped marks the byte cap
	ID    string // a resumable position, when the stream has one
	Data  []byte
	JSON  bool // Data is one JSON value (an event such as a gap or an end), not output bytes
	// Final marks the item that says how the stream's subject ended (a process's end): it
	// passes the byte cap, so a capped stream still tells how it ended. Its bytes are not
	// counted against the cap.
	Final bool
}

// EventCapped is the item a stream carries once, in order, when it reaches its byte cap: after
// it nothing more is sent.
const EventCapped = "capped"

// Ended is the error Next returns once a stream was ended.
type Ended struct{ Reason Reason }

func (e *Ended) Error() string { return "stream ended: " + string(e.Reason) }

// Stream is one admitted stream: a queue bounded in bytes between producers (Send, which never
// blocks) and the sink's one writer goroutine (Next, paced).
type Stream struct {
	r       *Registry
	opts    Options
	opened  time.Time
	span    trace.Span
	limiter *rate.Limiter // nil: unpaced
	chunk   int           // the largest Data one item may carry, so pacing stays smooth

	mu        sync.Mutex // guards the fields below
	items     []Item
	queued    int64 // cost of items waiting
	queuedLen int64 // Data bytes of items waiting
	taken     int64 // cost of items handed to the writer
	bytes     int64 // Data bytes handed to the writer
	capped    bool
	dropped   int64 // Data bytes not sent because of the cap
	finished  bool
	reason    Reason // "" while open
	lastTake  time.Time
	firstOut  bool
	closed    bool
	ready     chan struct{} // capacity 1: items, finished or reason changed
	room      chan struct{} // capacity 1: the writer took items (SendWait may go on)
	done      chan struct{} // closed by End
	doneClose sync.Once
}

func newStream(r *Registry, o Options) *Stream {
	s := &Stream{r: r, opts: o, opened: r.cfg.Now(), ready: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{}), chunk: 32 << 10}
	s.lastTake = s.opened
	if !o.Unpaced {
		// A burst of a sixteenth of a second keeps small outputs instant and the long-run rate
		// within a few percent of the setting.
		burst := int(min(max(r.cfg.BytesPerSecond/16, 4<<10+MessageOverhead), 64<<10+MessageOverhead))
		s.limiter = rate.NewLimiter(rate.Limit(r.cfg.BytesPerSecond), burst)
		s.chunk = burst - MessageOverhead
	}
	return s
}

// MaxItem is the most Data one item carries: Send splits larger ones. A producer whose items
// carry positions (ID) splits them itself, so each part has its own.
func (s *Stream) MaxItem() int { return s.chunk }

// Kind is the stream's kind.
func (s *Stream) Kind() Kind { return s.opts.Kind }

// Done is closed when the stream is ended (not when it finishes normally).
func (s *Stream) Done() <-chan struct{} { return s.done }

// Reason is why the stream ended, or "" while it is open.
func (s *Stream) Reason() Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Capped reports whether the stream reached its byte cap, and how many bytes it has not sent
// since.
func (s *Stream) Capped() (bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capped, s.dropped
}

// Bytes is how many bytes of Data the writer has taken.
func (s *Stream) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default: // a signal is pending; the writer sees every change when it wakes
	}
}

// Send queues an item for the writer. It never blocks. It reports false when the stream no
// longer takes items (ended or finished). Past the byte cap an item is counted and not queued;
// past the queue's bound the stream ends: ReasonSlow when the writer stopped taking, else
// ReasonLimit (output outran the pace). For producers that fan out to many streams.
func (s *Stream) Send(it Item) bool { return s.send(nil, it) }

// SendWait queues an item like Send, but when the queue is full it waits for the writer to
// take some (backpressure: a producer that serves only this stream, such as a streamed
// command, is slowed down to the stream's pace, as by a slow terminal). It gives up, ending
// the stream with ReasonSlow, once the writer has taken nothing for the registry's Stall, and
// returns false when ctx ends first.
func (s *Stream) SendWait(ctx context.Context, it Item) bool { return s.send(ctx, it) }

// send is Send (ctx nil) and SendWait.
func (s *Stream) send(ctx context.Context, it Item) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" || s.finished {
		return false
	}
	for first := true; first || len(it.Data) > 0; first = false {
		part := it
		if len(part.Data) > s.chunk {
			n := s.chunk
			for n > s.chunk-utf8.UTFMax && !utf8.RuneStart(part.Data[n]) {
				n-- // keep a character whole, so text stays text
			}
			part.Data = it.Data[:n]
		}
		it.Data = it.Data[len(part.Data):]
		if ctx != nil && !s.waitRoomLocked(ctx, int64(len(part.Data))+MessageOverhead) {
			return false
		}
		if !s.enqueueLocked(part) {
			if s.capped {
				s.dropped += int64(len(it.Data)) // the parts not yet split off
			}
			return s.reason == ""
		}
	}
	return true
}

// waitRoomLocked waits, releasing the lock, until an item of cost fits the queue (or the cap
// will drop it anyway). It reports false when the stream ended, stalled or ctx ended.
func (s *Stream) waitRoomLocked(ctx context.Context, cost int64) bool {
	for !s.capped && s.queued+cost > s.r.cfg.QueueBytes && len(s.items) > 0 {
		wait := s.r.cfg.Stall - s.r.cfg.Now().Sub(s.lastTake)
		if wait <= 0 {
			s.endLocked(ReasonSlow)
			return false
		}
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-s.room:
		case <-t.C:
		case <-s.done:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
		if s.reason != "" || ctx.Err() != nil {
			return false
		}
	}
	return true
}

func (s *Stream) enqueueLocked(it Item) bool {
	cost := int64(len(it.Data)) + MessageOverhead
	if it.Final {
		s.items = append(s.items, it)
		s.queued += cost
		s.signal()
		return true
	}
	if s.capped {
		s.dropped += int64(len(it.Data))
		return false
	}
	if s.limiter != nil && s.bytes+s.queuedLen+int64(len(it.Data)) > s.r.cfg.MaxBytes {
		// What fits under the cap is sent; the rest, and everything after, is not.
		room := int(s.r.cfg.MaxBytes - s.bytes - s.queuedLen)
		for i := 1; i < utf8.UTFMax && room > 0 && room < len(it.Data) && !utf8.RuneStart(it.Data[room]); i++ {
			room-- // keep a character whole
		}
		if room > 0 {
			s.items = append(s.items, Item{Event: it.Event, ID: it.ID, Data: it.Data[:room]})
			s.queued += int64(room) + MessageOverhead
			s.queuedLen += int64(room)
		}
		s.capped = true
		s.dropped += int64(len(it.Data) - max(room, 0))
		s.items = append(s.items, Item{Event: EventCapped})
		s.signal()
		return false
	}
	if s.queued+cost > s.r.cfg.QueueBytes && len(s.items) > 0 {
		reason := ReasonLimit
		if s.r.cfg.Now().Sub(s.lastTake) >= time.Second {
			reason = ReasonSlow
		}
		s.endLocked(reason)
		return false
	}
	s.items = append(s.items, it)
	s.queued += cost
	s.queuedLen += int64(len(it.Data))
	s.signal()
	return true
}

// Finish says no more items will come: Next returns what is queued, then io.EOF.
func (s *Stream) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	s.signal()
}

// End ends the stream now, with reason: Next returns *Ended, Done is closed, queued items are
// dropped. The first reason wins; later calls do nothing.
func (s *Stream) End(reason Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(reason)
}

func (s *Stream) endLocked(reason Reason) {
	if s.reason != "" {
		return
	}
	s.reason = reason
	s.items, s.queued, s.queuedLen = nil, 0, 0
	s.doneClose.Do(func() { close(s.done) })
	s.signal()
}

// Next returns the next batch for the writer, paced: it waits until there is something to send
// and the pace allows it. It returns an empty batch and no error when idle passed with nothing
// to send (idle <= 0: no such timeout), io.EOF after Finish once everything was taken, and
// *Ended once the stream was ended. Only the writer goroutine calls it.
func (s *Stream) Next(ctx context.Context, idle time.Duration) ([]Item, error) {
	var idleC <-chan time.Time
	if idle > 0 {
		t := time.NewTimer(idle)
		defer t.Stop()
		idleC = t.C
	}
	for {
		s.mu.Lock()
		if s.reason != "" {
			r := s.reason
			s.mu.Unlock()
			return nil, &Ended{Reason: r}
		}
		if len(s.items) > 0 {
			first := s.takeLocked()
			s.mu.Unlock()
			if err := s.pace(ctx, first); err != nil {
				return nil, err
			}
			batch := []Item{first}
			// Whatever else the pace allows right now goes in the same batch: one flush.
			s.mu.Lock()
			for len(s.items) > 0 && (s.limiter == nil || s.limiter.AllowN(time.Now(), cost(s.items[0]))) {
				batch = append(batch, s.takeLocked())
			}
			s.mu.Unlock()
			return batch, nil
		}
		if s.finished {
			s.mu.Unlock()
			return nil, io.EOF
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-idleC:
			return nil, nil
		}
	}
}

func cost(it Item) int { return len(it.Data) + MessageOverhead }

// takeLocked removes the first item and accounts for it.
func (s *Stream) takeLocked() Item {
	it := s.items[0]
	s.items[0] = Item{}
	s.items = s.items[1:]
	c := int64(cost(it))
	s.queued -= c
	s.queuedLen -= int64(len(it.Data))
	s.taken += c
	s.bytes += int64(len(it.Data))
	s.lastTake = s.r.cfg.Now()
	select {
	case s.room <- struct{}{}:
	default: // a wake-up is pending
	}
	if !s.firstOut && len(it.Data) > 0 {
		s.firstOut = true
		s.r.m.firstOutput.WithLabelValues(string(s.opts.Kind)).Observe(s.lastTake.Sub(s.opened).Seconds())
	}
	s.r.m.bytes.WithLabelValues(string(s.opts.Kind)).Add(float64(len(it.Data)))
	return it
}

// pace waits until the limiter allows the item, the stream ends or ctx ends.
func (s *Stream) pace(ctx context.Context, it Item) error {
	if s.limiter == nil {
		return nil
	}
	res := s.limiter.ReserveN(time.Now(), cost(it))
	d := res.Delay()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.done:
		res.Cancel()
		return &Ended{Reason: s.Reason()}
	case <-ctx.Done():
		res.Cancel()
		return ctx.Err()
	}
}

// Close releases the stream's place in the registry and records how it ended (ReasonDone if
// it was never ended). The stream's owner calls it once the writer is done; later calls do
// nothing.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.endLocked(ReasonDone)
	reason, bytes, capped := s.reason, s.bytes, s.capped
	s.mu.Unlock()
	s.r.release(s)
	s.r.m.closed.WithLabelValues(string(s.opts.Kind), string(reason)).Inc()
	s.span.SetAttributes(
		attribute.String("hangar.stream.kind", string(s.opts.Kind)),
		attribute.String("hangar.stream.reason", string(reason)),
		attribute.Int64("hangar.stream.bytes", bytes),
		attribute.Bool("hangar.stream.capped", capped),
		attribute.String("hangar.sandbox", s.opts.Sandbox),
		attribute.String("hangar.user", s.opts.Principal.User),
	)
	s.span.End()
}
