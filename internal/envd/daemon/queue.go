package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coder/quartz"

	bytequeue "github.com/hangar-dev/hangar/internal/queue"
)

// ErrSlowSubscriber ends a stream whose client did not keep up: more output was waiting for it
// than its queue may hold. The process and the other subscribers are not affected.
var ErrSlowSubscriber = errors.New("subscriber fell behind")

// queue holds what is waiting to be sent to one subscriber, bounded in bytes: internal/queue's
// Queue with the daemon's policy. The subscriber's own goroutine takes. Past the bound a push either fails at
// once (an attached client or a watcher: the subscriber is ended with ErrSlowSubscriber rather
// than skipped), or, for a process's starter (blocking), waits for room — slowing the process
// down as a slow terminal would — and fails only once the subscriber has taken nothing for
// stall.
type queue[T any] struct {
	q     *bytequeue.Queue[T]
	block bool          // a full queue makes push wait (the starter of a process)
	stall time.Duration // with block: how long the taker may take nothing before push fails
}

func newQueue[T any](limit int, clock quartz.Clock) *queue[T] {
	return &queue[T]{q: bytequeue.New[T](int64(limit), clock)}
}

// newBlockingQueue is a queue whose pushes wait for room, failing after stall without a take.
func newBlockingQueue[T any](limit int, stall time.Duration, clock quartz.Clock) *queue[T] {
	q := newQueue[T](limit, clock)
	q.block, q.stall = true, stall
	return q
}

// push adds v, which costs size bytes. It reports false when the queue is closed or has
// failed, including when this push failed it.
func (s *queue[T]) push(v T, size int) bool {
	q := s.q
	if !s.block {
		err := q.Push(v, int64(size))
		if errors.Is(err, bytequeue.ErrFull) {
			q.Fail(fmt.Errorf("%w: more than %d bytes were waiting to be sent", ErrSlowSubscriber, q.Limit()))
		}
		return err == nil
	}
	// The process's output waits; only the queue failing (cancel) or closing releases it.
	err := q.PushWait(context.Background(), v, int64(size), s.stall)
	if errors.Is(err, bytequeue.ErrStalled) {
		q.Fail(fmt.Errorf("%w: %d bytes were waiting and nothing was taken for %s", ErrSlowSubscriber, q.Bytes(), s.stall))
	}
	return err == nil
}

// fail fails the queue with err: pending items are dropped and the subscriber ends with err.
// The first failure wins.
func (s *queue[T]) fail(err error) { s.q.Fail(err) }

// cancel fails the queue (its subscriber went away), releasing a push waiting for room.
func (s *queue[T]) cancel() { s.fail(errors.New("the subscriber went away")) }

// close marks the end of the items; those already pushed are still taken.
func (s *queue[T]) close() { s.q.Close() }

// take removes and returns every pending item. done is true when nothing more will come
// (closed, and these are the last items); err is set when the queue failed.
func (s *queue[T]) take() (items []T, done bool, err error) {
	items, closed, err := s.q.TakeAll()
	return items, closed || err != nil, err
}

// ready receives when items arrived, or the queue closed or failed, since the last take.
func (s *queue[T]) ready() <-chan struct{} { return s.q.Ready() }
