package stream

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/queue"
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

// Stream is one admitted stream: a queue bounded in bytes (internal/queue) between producers
// (Send, which never blocks) and the sink's one writer (Next, paced; or Render, which lets a
// dedicated producer's SendWait write an item itself when nothing waits: render.go).
//
// Locks, always taken in this order: wmu, the right to write to the client while Render runs
// (render.go); mu, the stream's own state, under which every decision (the cap, the bound) and
// the push it leads to are one step; then the queue's own lock, inside its methods. No lock is
// held while a producer or the writer waits, except wmu by the one writing.
type Stream struct {
	r       *Registry
	opts    Options
	opened  time.Time
	span    trace.Span
	limiter *rate.Limiter // nil: unpaced
	chunk   int           // the largest Data one item may carry, so pacing stays smooth
	q       *queue.Queue[Item]
	keys    keys // what it counts under
	shared  bool // counted in Config.Shared too (under keys): Close gives it back there

	// credit is, under mu, tokens the limiter is sure to hold: what it held when the last
	// item written through was charged, less the items taken on it since. An item that costs
	// no more goes through without a look at the clock, and is charged after its write
	// (writeThrough); the queue's pace, which takes from the limiter too, sets it to 0.
	credit float64

	// This stream's own series of the kind's metrics, looked up once.
	mBytes       prometheus.Counter
	mFirstOutput prometheus.Observer

	// The writer's own (Next's): the batch array handed out again at each call, the idle
	// timer, made at the first wait and reset at the next ones, and whether the writer is
	// Render, holding wmu.
	batchBuf  []Item
	idleT     *quartz.Timer
	rendering bool
	// When Next last handed out a batch of a coalesced stream (the clock's UnixNano; 0:
	// none yet): the writer sets it, Due reads it (coalesce.go).
	lastBatch atomic.Int64

	// wmu is held by whoever calls Render's write: Render itself, except while it waits with
	// nothing taken, or a producer writing through. through is the batch a write-through
	// hands to write, its holder's.
	wmu     sync.Mutex
	through [1]Item

	mu       sync.Mutex // guards the fields below
	accepted int64      // Data bytes queued so far (not counting Final items), for the cap
	bytes    int64      // Data bytes handed to the writer
	capped   bool
	dropped  int64       // Data bytes not sent because of the cap
	reason   Reason      // "" while open
	slow     SlowTrigger // with ReasonSlow: what found the client slow
	// finishWith is FinishWith's reason: the stream ends with it once what is queued is taken.
	finishWith Reason
	firstOut   bool
	closed     bool
	write      Write // the writer Render or Produce was given; nil when none runs
	// Under Produce (produce.go): what an end calls (it cancels the producer's context), and
	// the keep-alive timer.
	endProduce func(Reason)
	keepT      *quartz.Timer
}

func newStream(r *Registry, o Options) *Stream {
	s := &Stream{r: r, opts: o, opened: r.cfg.Clock.Now(), q: queue.New[Item](r.cfg.QueueBytes, r.cfg.Clock), chunk: 32 << 10,
		mBytes: r.m.bytes.WithLabelValues(string(o.Kind)), mFirstOutput: r.m.firstOutput.WithLabelValues(string(o.Kind))}
	if !o.Unpaced {
		// A burst of a sixteenth of a second keeps small outputs instant and the long-run rate
		// within a few percent of the setting.
		burst := int(min(max(r.cfg.BytesPerSecond/16, 4<<10+MessageOverhead), 64<<10+MessageOverhead))
		s.limiter = rate.NewLimiter(rate.Limit(r.cfg.BytesPerSecond), burst)
		s.chunk = burst - MessageOverhead
	}
	return s
}

// MaxItem is the most Data one item carries: Send splits larger ones (not JSON items: each is
// one value). A producer whose items carry positions (ID) splits them itself, so each part has
// its own.
func (s *Stream) MaxItem() int { return s.chunk }

// Kind is the stream's kind.
func (s *Stream) Kind() Kind { return s.opts.Kind }

// Done is closed when the stream is ended (not when it finishes normally).
func (s *Stream) Done() <-chan struct{} { return s.q.Dead() }

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

// Send queues an item for the writer. It never blocks. It reports false when the stream no
// longer takes items (ended or finished). Past the byte cap an item is counted and not queued;
// past the queue's bound the stream ends: ReasonSlow (SlowQueueFull) when the writer has
// taken nothing for the registry's SlowIdle, else ReasonLimit (output outran the pace). For
// producers that fan out to many streams.
func (s *Stream) Send(it Item) bool { return s.enqueue(context.Background(), it, false) }

// SendWait queues an item like Send, but when the queue is full it waits for the writer to
// take some (backpressure: a producer that serves only this stream, such as a streamed
// command, is slowed down to the stream's pace, as by a slow terminal). It gives up, ending
// the stream with ReasonSlow (SlowStall), once the writer has taken nothing for the
// registry's Stall, and returns false when ctx ends first. While Render waits with nothing
// queued, SendWait writes an item the pace allows at once itself, on the caller's goroutine
// (render.go), and returns once it is written.
func (s *Stream) SendWait(ctx context.Context, it Item) bool {
	if handled, ok := s.writeThrough(it); handled {
		return ok
	}
	if s.producing() {
		return s.sendProduced(ctx, it)
	}
	return s.enqueue(ctx, it, true)
}

// enqueue is Send, and with wait SendWait's queueing: it cuts it into parts of at most chunk
// bytes and queues each.
func (s *Stream) enqueue(ctx context.Context, it Item, wait bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" || s.q.Closed() {
		return false
	}
	for first := true; first || len(it.Data) > 0; first = false {
		var part Item
		part, it = s.cut(it)
		if err := s.putLocked(ctx, part, wait); errors.Is(err, errCapped) {
			s.dropped += int64(len(it.Data)) // the parts not yet split off
			return s.reason == ""
		} else if err != nil {
			return false
		}
	}
	return true
}

// cut splits off its first part, at most chunk bytes of Data (a JSON value is one message:
// never cut), and returns it and the rest.
func (s *Stream) cut(it Item) (part, rest Item) {
	part, rest = it, it
	if len(it.Data) > s.chunk && !it.JSON {
		n := s.chunk
		for n > s.chunk-utf8.UTFMax && !utf8.RuneStart(it.Data[n]) {
			n-- // keep a character whole, so text stays text
		}
		part.Data = it.Data[:n]
	}
	rest.Data = it.Data[len(part.Data):]
	return part, rest
}

// putLocked queues one part, with wait waiting for room when it does not fit. It returns
// errCapped when the byte cap dropped it, and another error when the stream ended (a Send
// finding the queue full ends it: endFullLocked) or finished, or the wait gave up.
func (s *Stream) putLocked(ctx context.Context, it Item, wait bool) error {
	if wait && ctx.Err() != nil {
		return ctx.Err()
	}
	for {
		err := s.enqueueLocked(it)
		switch {
		case !errors.Is(err, queue.ErrFull):
			return err
		case !wait:
			s.endFullLocked()
			return err
		}
		if err := s.waitRoomLocked(ctx, cost(it)); err != nil {
			return err
		}
		// Room was made; another producer may take it before this one has mu again: then
		// the loop waits again.
	}
}

// waitRoomLocked waits, releasing mu, until an item of cost fits the queue. It returns the
// queue's error when the stream ended, stalled (it ends it: SlowStall) or ctx ended.
func (s *Stream) waitRoomLocked(ctx context.Context, cost int64) error {
	s.mu.Unlock()
	err := s.q.WaitRoom(ctx, cost, s.r.cfg.Stall)
	s.mu.Lock()
	if errors.Is(err, queue.ErrStalled) {
		s.endSlowLocked(SlowStall)
	}
	return err
}

// errCapped is enqueueLocked's answer for an item the byte cap dropped.
var errCapped = errors.New("past the byte cap")

// enqueueLocked queues it, or refuses it: errCapped past the byte cap, queue.ErrFull past the
// queue's bound, or the queue's refusal once the stream finished or ended.
func (s *Stream) enqueueLocked(it Item) error {
	if it.Final {
		return s.q.PushOver(it, cost(it))
	}
	if s.capped {
		s.dropped += int64(len(it.Data))
		return errCapped
	}
	if s.limiter != nil && s.accepted+int64(len(it.Data)) > s.r.cfg.MaxBytes {
		s.capLocked(it)
		return errCapped
	}
	if err := s.q.Push(it, cost(it)); err != nil {
		return err
	}
	s.accepted += int64(len(it.Data))
	return nil
}

// capLocked queues what of it fits under the byte cap, then EventCapped: nothing is sent after.
func (s *Stream) capLocked(it Item) {
	room := int(s.r.cfg.MaxBytes - s.accepted)
	for i := 1; i < utf8.UTFMax && room > 0 && room < len(it.Data) && !utf8.RuneStart(it.Data[room]); i++ {
		room-- // keep a character whole
	}
	if room > 0 {
		part := Item{Event: it.Event, ID: it.ID, Data: it.Data[:room]}
		s.q.PushOver(part, cost(part))
		s.accepted += int64(room)
	}
	s.capped = true
	s.dropped += int64(len(it.Data) - max(room, 0))
	s.q.PushOver(Item{Event: EventCapped}, MessageOverhead)
}

// endFullLocked ends a stream whose queue a Send found full: the client's doing (ReasonSlow,
// SlowQueueFull) when its writer has taken nothing for SlowIdle, else the output's
// (ReasonLimit: it outran the pace for longer than the queue holds).
func (s *Stream) endFullLocked() {
	if s.q.Idle() >= s.r.cfg.SlowIdle {
		s.endSlowLocked(SlowQueueFull)
		return
	}
	s.endLocked(ReasonLimit)
}

// Finish says no more items will come: Next returns what is queued, then io.EOF.
func (s *Stream) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q.Close()
}

// FinishWith is Finish for a producer that has nothing more to send for a reason other than
// being done (a session whose sandbox failed): what is queued is still sent, then the stream
// ends with reason, as End would (Next returns *Ended).
func (s *Stream) FinishWith(reason Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finishWith == "" {
		s.finishWith = reason
	}
	s.q.Close()
}

// End ends the stream now, with reason: Next returns *Ended, Done is closed, queued items are
// dropped. The first reason wins; later calls do nothing. A client found too slow is ended
// with EndSlow, which says how it was found.
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
	s.q.Fail(&Ended{Reason: reason})
	if s.endProduce != nil {
		s.endProduce(reason)
	}
}

// Next returns the next batch for the writer, paced: it waits until there is something to send
// and the pace allows it. It returns an empty batch and no error when idle passed with nothing
// to send (idle <= 0: no such timeout), io.EOF after Finish once everything was taken, and
// *Ended once the stream was ended. Only the writer goroutine calls it. The batch is the
// writer's until its next call of Next, which reuses its array: render it, do not keep it. A
// stream opened with Options.Coalesce hands out batches no closer than that (coalesce.go).
func (s *Stream) Next(ctx context.Context, idle time.Duration) ([]Item, error) {
	if s.opts.Coalesce > 0 {
		return s.nextCoalesced(ctx, idle)
	}
	return s.next(ctx, idle)
}

// next is Next without coalescing.
func (s *Stream) next(ctx context.Context, idle time.Duration) ([]Item, error) {
	clear(s.batchBuf) // the last batch's items are rendered: let their bytes go
	var idleC <-chan time.Time
	for {
		first, got, err := s.firstOrEnd()
		if got || err != nil {
			s.stopIdle(idleC)
			if err != nil {
				return nil, err
			}
			if err := s.pace(ctx, first); err != nil {
				return nil, err
			}
			return s.batch(first), nil
		}
		if idle > 0 && idleC == nil {
			idleC = s.startIdle(idle)
		}
		idled, err := s.wait(ctx, idleC)
		if idled {
			return nil, nil
		}
		if err != nil {
			s.stopIdle(idleC)
			return nil, err
		}
	}
}

// wait waits until the queue changes (nil), ctx ends (its error) or idleC fires (idled). Under
// Render it lets wmu go meanwhile, nothing being taken: a producer may write through.
func (s *Stream) wait(ctx context.Context, idleC <-chan time.Time) (idled bool, err error) {
	if s.rendering {
		s.wmu.Unlock()
		defer s.wmu.Lock()
	}
	select {
	case <-s.q.Ready():
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-idleC:
		return true, nil
	}
}

// firstOrEnd takes the first item queued (got), or says why there will be none (err); neither
// while there is nothing yet. A stream finished with FinishWith ends with its reason here,
// once everything queued was taken.
func (s *Stream) firstOrEnd() (first Item, got bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" {
		return first, false, &Ended{Reason: s.reason}
	}
	if first, got = s.takeLocked(); got {
		return first, true, nil
	}
	if !s.q.Closed() {
		return first, false, nil
	}
	if r := s.finishWith; r != "" {
		s.endLocked(r)
		return first, false, &Ended{Reason: r}
	}
	return first, false, io.EOF
}

// startIdle arms the writer's idle timer for d, made once and reset after: a stream that
// waits between every line does not make a timer per line.
func (s *Stream) startIdle(d time.Duration) <-chan time.Time {
	if s.idleT == nil {
		s.idleT = s.r.cfg.Clock.NewTimer(d, "stream", "idle")
	} else {
		s.idleT.Reset(d, "stream", "idle")
	}
	return s.idleT.C
}

// stopIdle stops the idle timer when c says it was armed, and drops a tick it may have sent
// meanwhile, so the next wait does not end at once.
func (s *Stream) stopIdle(c <-chan time.Time) {
	if c == nil || s.idleT.Stop() {
		return
	}
	select {
	case <-c:
	default:
	}
}

// batch is first and whatever else the pace allows right now: one flush.
func (s *Stream) batch(first Item) []Item {
	batch := append(s.batchBuf[:0], first)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		_, size, ok := s.q.Peek()
		if !ok || s.limiter != nil && !s.limiter.AllowN(s.r.cfg.Clock.Now(), int(size)) {
			s.batchBuf = batch
			return batch
		}
		s.credit = 0
		it, _ := s.takeLocked()
		batch = append(batch, it)
	}
}

func cost(it Item) int64 { return int64(len(it.Data)) + MessageOverhead }

// takeLocked removes the first item, if any, and accounts for it.
func (s *Stream) takeLocked() (Item, bool) {
	it, _, ok := s.q.Take()
	if !ok {
		return it, false
	}
	s.countLocked(it)
	return it, true
}

// countLocked accounts for an item handed to the writer.
func (s *Stream) countLocked(it Item) { s.countBytesLocked(len(it.Data)) }

func (s *Stream) countBytesLocked(n int) {
	if n <= 0 {
		return
	}
	s.bytes += int64(n)
	if !s.firstOut {
		s.firstOut = true
		s.mFirstOutput.Observe(s.r.cfg.Clock.Since(s.opened).Seconds())
	}
	s.mBytes.Add(float64(n))
}

// Passed accounts for n bytes a stream's owner sent to its client itself, not through the
// stream's queue: a proxied stream (an E2B SDK's envd call) whose bytes are the daemon's, passed
// on as they come. They count in Bytes and the kind's metrics as if the writer had taken them.
func (s *Stream) Passed(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countBytesLocked(n)
}

// pace waits until the limiter allows the item, the stream ends or ctx ends.
func (s *Stream) pace(ctx context.Context, it Item) error {
	if s.limiter == nil {
		return nil
	}
	now := s.r.cfg.Clock.Now()
	s.mu.Lock()
	res := s.limiter.ReserveN(now, int(cost(it)))
	s.credit = 0
	s.mu.Unlock()
	d := res.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	t := s.r.cfg.Clock.NewTimer(d, "stream", "pace")
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.q.Dead():
		res.CancelAt(s.r.cfg.Clock.Now())
		return &Ended{Reason: s.Reason()}
	case <-ctx.Done():
		res.CancelAt(s.r.cfg.Clock.Now())
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
	reason, slow, bytes, capped := s.reason, s.slow, s.bytes, s.capped
	s.mu.Unlock()
	s.r.release(s)
	s.r.m.closed.WithLabelValues(string(s.opts.Kind), string(reason)).Inc()
	if slow != "" {
		s.r.m.slow.WithLabelValues(string(s.opts.Kind), string(slow)).Inc()
	}
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
