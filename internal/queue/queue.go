// Package queue is the first-in first-out queue bounded in bytes that hangar puts between
// producers and the one goroutine that takes for a client: the stream registry's streams
// (internal/stream) and the envd daemon's subscribers (internal/envd/daemon). It holds the
// mechanics they share — byte accounting, a bound, wake-ups for the taker and for producers
// waiting for room, stall detection on an injected clock, closing (no more items) and failing
// (with an error, dropping what waits). What to do when the queue is full (fail at once, wait,
// cap, split) is each user's policy.
//
// A Queue's methods, except Lock, Unlock, Ready and Dead, must be called with its lock held,
// as sync.Cond's Wait is: a user keeps its own state under the same lock, so that deciding and
// pushing are one step. WaitRoom releases the lock while it waits.
package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coder/quartz"
)

// ErrStalled is WaitRoom's answer when the taker has taken nothing for the stall it was given.
var ErrStalled = errors.New("the taker took nothing")

// ErrClosed is WaitRoom's answer when the queue was closed while it waited.
var ErrClosed = errors.New("the queue is closed")

type entry[T any] struct {
	v    T
	size int64
}

// Queue is a FIFO of T bounded in bytes (each item's size is the caller's measure). It is
// empty-friendly: an item larger than the bound is still taken when the queue is empty.
type Queue[T any] struct {
	mu    sync.Mutex
	limit int64
	clock quartz.Clock

	// Guarded by mu.
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

// Lock locks the queue.
func (q *Queue[T]) Lock() { q.mu.Lock() }

// Unlock unlocks the queue.
func (q *Queue[T]) Unlock() { q.mu.Unlock() }

// Ready receives a value when items, Close or Fail changed since the taker last looked. It
// coalesces: after a receive the taker must look at everything (the lock needs not be held).
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Dead is closed when the queue fails (the lock needs not be held).
func (q *Queue[T]) Dead() <-chan struct{} { return q.dead }

// Len is how many items wait.
func (q *Queue[T]) Len() int { return len(q.items) }

// Bytes is the size of the items waiting.
func (q *Queue[T]) Bytes() int64 { return q.bytes }

// Limit is the bound in bytes.
func (q *Queue[T]) Limit() int64 { return q.limit }

// Closed reports whether Close was called.
func (q *Queue[T]) Closed() bool { return q.closed }

// Err is why the queue failed, or nil.
func (q *Queue[T]) Err() error { return q.err }

// Idle is how long ago the taker last took an item (or the queue was made).
func (q *Queue[T]) Idle() time.Duration { return q.clock.Since(q.lastTake) }

// Fits reports whether an item of size may be pushed without passing the bound: it fits under
// it, or the queue is empty (so an item larger than the bound is not refused forever).
func (q *Queue[T]) Fits(size int64) bool {
	return len(q.items) == 0 || q.bytes+size <= q.limit
}

// Push appends v, of size bytes, whether or not it fits: the caller decided (see Fits). It
// reports false, and appends nothing, once the queue is closed or failed.
func (q *Queue[T]) Push(v T, size int64) bool {
	if q.closed || q.err != nil {
		return false
	}
	q.items = append(q.items, entry[T]{v, size})
	q.bytes += size
	q.signal()
	return true
}

// WaitRoom waits, releasing the lock, until an item of size fits. It returns nil once it
// does (with the lock held, so a Push right after cannot pass the bound), the queue's error
// once it failed, ErrClosed once it was closed, ctx's error once ctx ended, and ErrStalled
// once the taker has taken nothing for stall. It does not fail the queue: that is the
// caller's policy.
func (q *Queue[T]) WaitRoom(ctx context.Context, size int64, stall time.Duration) error {
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
	switch {
	case q.err != nil:
		return true, q.err
	case q.closed:
		return true, ErrClosed
	case ctx.Err() != nil:
		return true, ctx.Err()
	case q.Fits(size):
		return true, nil
	}
	return false, nil
}

// Peek returns the first item and its size without taking it.
func (q *Queue[T]) Peek() (v T, size int64, ok bool) {
	if len(q.items) == 0 {
		return v, 0, false
	}
	return q.items[0].v, q.items[0].size, true
}

// Take removes and returns the first item and its size.
func (q *Queue[T]) Take() (v T, size int64, ok bool) {
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

// TakeAll removes and returns every item waiting (nil when none).
func (q *Queue[T]) TakeAll() []T {
	if len(q.items) == 0 {
		return nil
	}
	out := make([]T, len(q.items))
	for i, e := range q.items {
		out[i] = e.v
	}
	q.items, q.bytes = nil, 0
	q.took()
	return out
}

// Touch says the taker took an item that went around the queue (a stream's write-through):
// for the stall, it counts as a take.
func (q *Queue[T]) Touch() { q.lastTake = q.clock.Now() }

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
	q.closed = true
	q.signal()
	q.wakeRoom() // a producer waiting for room returns ErrClosed
}

// Fail fails the queue with err: what waits is dropped, pushes are refused, Dead is closed
// and every WaitRoom returns. The first error wins: Fail reports whether this call set it.
func (q *Queue[T]) Fail(err error) bool {
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
