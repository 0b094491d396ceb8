package daemon

import (
	"errors"
	"fmt"
	"sync"
)

// ErrSlowSubscriber ends a stream whose client did not keep up: more output was waiting for it
// than its queue may hold. The process and the other subscribers are not affected.
var ErrSlowSubscriber = errors.New("subscriber fell behind")

// queue holds what is waiting to be sent to one subscriber, bounded in bytes. Producers push
// and never block; the subscriber's own goroutine takes. When a push would go past the bound
// the queue fails: the subscriber is ended with ErrSlowSubscriber rather than skipped.
type queue[T any] struct {
	limit int

	mu     sync.Mutex // protects the fields below
	items  []T
	bytes  int
	closed bool  // the producer is done: nothing more will be pushed
	err    error // the queue failed; pending items are dropped and the subscriber ends with err

	ready chan struct{} // capacity 1: signalled when items, closed or err change
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{limit: limit, ready: make(chan struct{}, 1)}
}

// push adds v, which costs size bytes. It reports false when the queue is closed or has
// failed, including when this push failed it.
func (q *queue[T]) push(v T, size int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.err != nil {
		return false
	}
	if q.bytes+size > q.limit && len(q.items) > 0 {
		q.err = fmt.Errorf("%w: more than %d bytes were waiting to be sent", ErrSlowSubscriber, q.limit)
		q.items = nil
		q.bytes = 0
		q.signal()
		return false
	}
	q.items = append(q.items, v)
	q.bytes += size
	q.signal()
	return true
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
	return items, q.closed, nil
}

// signal must be called with mu held.
func (q *queue[T]) signal() {
	select {
	case q.ready <- struct{}{}:
	default: // a signal is already pending; the taker will see every change
	}
}
