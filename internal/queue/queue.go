// Package queue is the first-in first-out queue bounded in bytes that hangar puts between
// producers and the one goroutine that takes for a client: the stream registry's streams
// (internal/stream) and the envd daemon's subscribers (internal/envd/daemon). It holds the
// mechanics they share — byte accounting, a bound, wake-ups for the taker and for producers
// waiting for room, stall detection on an injected clock, closing (no more items) and failing
// (with an error, dropping what waits). What to do when the queue is full (fail at once, wait,
// cap, split) is each user's policy.
//
// A Queue locks itself: every method is safe for concurrent use, and each is one step (Push
// decides whether an item fits and appends it under one lock; PushWait waits for room and
// pushes). A user that keeps state of its own beside the queue guards it with its own lock,
// taken before any of the queue's methods is called (the queue calls nothing of its user's).
package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/quartz"
)

// ErrFull is Push's answer when the item does not fit under the bound.
var ErrFull = errors.New("the queue is full")

// ErrStalled is WaitRoom's and PushWait's answer when the taker has taken nothing for the
// stall it was given.
var ErrStalled = errors.New("the taker took nothing")

// ErrClosed is the answer of a push to, or a wait on, a queue that was closed.
var ErrClosed = errors.New("the queue is closed")

type entry[T any] struct {
	v    T
	size int64
}

// Queue is a FIFO of T bounded in bytes (each item's size is the caller's measure). It is
// empty-friendly: an item larger than the bound is still taken when the queue is empty. It is
// safe for concurrent use by many producers and one taker.
type Queue[T any] struct {
	limit int64
	clock quartz.Clock

	mu       sync.Mutex // guards the fields below
	items    []entry[T]
	bytes    int64
	closed   bool
	err      error
	lastTake time.Time

	ready chan struct{} // capacity 1: items, closed or err changed
	room  chan struct{} // capacity 1: the taker took items
	dead  chan struct{} // closed by Fail
}

// New returns an empty queue holding at most limit bytes, whose stall times read clock (nil:
// the real clock). The taker counts as having taken just now.
func New[T any](limit int64, clock quartz.Clock) *Queue[T] {
	if clock == nil {
		clock = quartz.NewReal()
	}
	return &Queue[T]{limit: limit, clock: clock, lastTake: clock.Now(), ready: make(chan struct{}, 1), room: make(chan struct{}, 1), dead: make(chan struct{})}
}

// Ready receives a value when items, Close or Fail changed since the taker last looked. It
// coalesces: after a receive the taker must look at everything.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Dead is closed when the queue fails.
func (q *Queue[T]) Dead() <-chan struct{} { return q.dead }

// Len is how many items wait.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Bytes is the size of the items waiting.
func (q *Queue[T]) Bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// Limit is the bound in bytes.
func (q *Queue[T]) Limit() int64 { return q.limit }

// Empty reports whether nothing waits and Close was not called: Len() == 0 && !Closed(),
// under one lock.
func (q *Queue[T]) Empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0 && !q.closed
}

// Closed reports whether Close was called.
func (q *Queue[T]) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Err is why the queue failed, or nil.
func (q *Queue[T]) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Idle is how long ago the taker last took an item (or the queue was made).
func (q *Queue[T]) Idle() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.clock.Since(q.lastTake)
}

// fits reports whether an item of size may be pushed without passing the bound: it fits under
// it, or the queue is empty (so an item larger than the bound is not refused forever).
func (q *Queue[T]) fits(size int64) bool {
	return len(q.items) == 0 || q.bytes+size <= q.limit
}

// Push appends v, of size bytes, if it fits under the bound (or the queue is empty). It
// returns ErrFull when it does not, ErrClosed once the queue is closed and the queue's error
// once it failed; then it appends nothing.
func (q *Queue[T]) Push(v T, size int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.refusal(); err != nil {
		return err
	}
	if !q.fits(size) {
		return ErrFull
	}
	q.append(v, size)
	return nil
}

// PushOver appends v, of size bytes, whether or not it fits: for the few items a user lets
// pass the bound (a stream's last word on how it ended). It returns ErrClosed or the queue's
// error, appending nothing, once the queue is closed or failed.
func (q *Queue[T]) PushOver(v T, size int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.refusal(); err != nil {
		return err
	}
	q.append(v, size)
	return nil
}

// PushWait appends v, of size bytes, waiting for room first if it does not fit (WaitRoom),
// and pushing in the same step as the wait ends, so no other push takes the room meanwhile.
// It returns WaitRoom's errors; then it appended nothing.
func (q *Queue[T]) PushWait(ctx context.Context, v T, size int64, stall time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.waitRoomLocked(ctx, size, stall); err != nil {
		return err
	}
	q.append(v, size)
	return nil
}

func (q *Queue[T]) refusal() error {
	switch {
	case q.err != nil:
		return q.err
	case q.closed:
		return ErrClosed
	}
	return nil
}

func (q *Queue[T]) append(v T, size int64) {
	q.items = append(q.items, entry[T]{v, size})
	q.bytes += size
	q.signal()
}

// WaitRoom waits until an item of size fits. It returns nil once it does, the queue's error
// once it failed, ErrClosed once it was closed, ctx's error once ctx ended, and ErrStalled
// once the taker has taken nothing for stall. It does not fail the queue: that is the
// caller's policy. Another producer may take the room before the caller's Push (which then
// says ErrFull, and the caller waits again); PushWait waits and pushes in one step.
func (q *Queue[T]) WaitRoom(ctx context.Context, size int64, stall time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waitRoomLocked(ctx, size, stall)
}

// waitRoomLocked is WaitRoom with q.mu held; it releases the lock while it waits.
func (q *Queue[T]) waitRoomLocked(ctx context.Context, size int64, stall time.Duration) error {
	for waited := false; ; waited = true {
		if done, err := q.roomOrEnd(ctx, size); done {
			if waited {
				q.wakeRoom() // another producer may be waiting for the same wake-up
			}
			return err
		}
		wait := stall - q.clock.Since(q.lastTake)
		if wait <= 0 {
			return ErrStalled
		}
		q.mu.Unlock()
		t := q.clock.NewTimer(wait, "queue", "stall")
		select {
		case <-q.room:
		case <-q.dead:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		q.mu.Lock()
	}
}

// roomOrEnd is WaitRoom's test: done when the wait is over, with its answer.
func (q *Queue[T]) roomOrEnd(ctx context.Context, size int64) (done bool, err error) {
	if err := q.refusal(); err != nil {
		return true, err
	}
	switch {
	case ctx.Err() != nil:
		return true, ctx.Err()
	case q.fits(size):
		return true, nil
	}
	return false, nil
}

// Peek returns the first item and its size without taking it. With one taker, a Take after it
// returns the same item.
func (q *Queue[T]) Peek() (v T, size int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return v, 0, false
	}
	return q.items[0].v, q.items[0].size, true
}

// Take removes and returns the first item and its size.
func (q *Queue[T]) Take() (v T, size int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return v, 0, false
	}
	e := q.items[0]
	q.items[0] = entry[T]{} // let the item be collected
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil // start the next burst on a fresh array instead of creeping along this one
	}
	q.bytes -= e.size
	q.took()
	return e.v, e.size, true
}

// TakeAll removes and returns every item waiting (nil when none), in one step with whether
// the queue is closed (then these are the last items) and its error (then there are none).
func (q *Queue[T]) TakeAll() (items []T, closed bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, q.closed, q.err
	}
	if len(q.items) > 0 {
		items = make([]T, len(q.items))
		for i, e := range q.items {
			items[i] = e.v
		}
		q.items, q.bytes = nil, 0
		q.took()
	}
	return items, q.closed, nil
}

// Touch says the taker took an item that went around the queue (a stream's write-through):
// for the stall, it counts as a take.
func (q *Queue[T]) Touch() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lastTake = q.clock.Now()
}

func (q *Queue[T]) took() {
	q.lastTake = q.clock.Now()
	q.wakeRoom()
}

func (q *Queue[T]) wakeRoom() {
	select {
	case q.room <- struct{}{}:
	default: // a wake-up is pending
	}
}

// Close says nothing more will be pushed; what waits is still taken, and producers waiting for
// room return.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
	q.wakeRoom() // a producer waiting for room returns ErrClosed
}

// Fail fails the queue with err: what waits is dropped, pushes are refused, Dead is closed
// and every WaitRoom returns. The first error wins: Fail reports whether this call set it.
func (q *Queue[T]) Fail(err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return false
	}
	q.err = err
	q.items, q.bytes = nil, 0
	close(q.dead)
	q.signal()
	return true
}

func (q *Queue[T]) signal() {
	select {
	case q.ready <- struct{}{}:
	default: // a signal is pending; the taker sees every change when it wakes
	}
}
