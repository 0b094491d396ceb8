package daemon

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrSlowSubscriber ends a stream whose client did not keep up: more output was waiting for it
// than its queue may hold. The process and the other subscribers are not affected.
var ErrSlowSubscriber = errors.New("subscriber fell behind")

// queue holds what is waiting to be sent to one subscriber, bounded in bytes. The
// subscriber's own goroutine takes. Past the bound a push either fails at once (a watcher: the
// subscriber is ended with ErrSlowSubscriber rather than skipped), or, for a process's starter
// (blocking), waits for room — slowing the process down as a slow terminal would — and fails
// only once the subscriber has taken nothing for stall.
type queue[T any] struct {
	limit int
	block bool          // a full queue makes push wait (the starter of a process)
	stall time.Duration // with block: how long the taker may take nothing before push fails

	mu       sync.Mutex // protects the fields below
	items    []T
	bytes    int
	closed   bool  // the producer is done: nothing more will be pushed
	err      error // the queue failed; pending items are dropped and the subscriber ends with err
	lastTake time.Time

	ready chan struct{} // capacity 1: signalled when items, closed or err change
	room  chan struct{} // capacity 1: signalled when the taker took items
	dead  chan struct{} // closed when the queue fails: every waiting push returns
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{limit: limit, ready: make(chan struct{}, 1), room: make(chan struct{}, 1), dead: make(chan struct{}), lastTake: time.Now()}
}

// newBlockingQueue is a queue whose pushes wait for room, failing after stall without a take.
func newBlockingQueue[T any](limit int, stall time.Duration) *queue[T] {
	q := newQueue[T](limit)
	q.block, q.stall = true, stall
	return q
}

// push adds v, which costs size bytes. It reports false when the queue is closed or has
// failed, including when this push failed it.
func (q *queue[T]) push(v T, size int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.closed || q.err != nil {
			return false
		}
		if q.bytes+size <= q.limit || len(q.items) == 0 {
			break
		}
		if !q.block {
			q.failLocked(fmt.Errorf("%w: more than %d bytes were waiting to be sent", ErrSlowSubscriber, q.limit))
			return false
		}
		wait := q.stall - time.Since(q.lastTake)
		if wait <= 0 {
			q.failLocked(fmt.Errorf("%w: %d bytes were waiting and nothing was taken for %s", ErrSlowSubscriber, q.bytes, q.stall))
			return false
		}
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-q.room:
		case <-q.dead:
		case <-t.C:
		}
		t.Stop()
		q.mu.Lock()
	}
	q.items = append(q.items, v)
	q.bytes += size
	q.signal()
	return true
}

func (q *queue[T]) failLocked(err error) {
	if q.err != nil {
		return
	}
	q.err = err
	q.items = nil
	q.bytes = 0
	q.signal()
	close(q.dead)
}

// cancel fails the queue (its subscriber went away), releasing a push waiting for room.
func (q *queue[T]) cancel() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.failLocked(errors.New("the subscriber went away"))
	}
}

// close marks the end of the items; those already pushed are still taken.
func (q *queue[T]) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
}

// take removes and returns every pending item. done is true when nothing more will come
// (closed, and these are the last items); err is set when the queue failed.
func (q *queue[T]) take() (items []T, done bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return nil, true, q.err
	}
	items, q.items, q.bytes = q.items, nil, 0
	if len(items) > 0 {
		q.lastTake = time.Now()
		select {
		case q.room <- struct{}{}:
		default: // a wake-up is pending
		}
	}
	return items, q.closed, nil
}

// signal must be called with mu held.
func (q *queue[T]) signal() {
	select {
	case q.ready <- struct{}{}:
	default: // a signal is already pending; the taker will see every change
	}
}
