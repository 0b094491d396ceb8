package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestAttachedQueueFailsAtOnce: an attached subscriber's full queue fails the push and the
// subscriber (ErrSlowSubscriber) without waiting.
func TestAttachedQueueFailsAtOnce(t *testing.T) {
	t.Parallel()
	q := newQueue[int](100, quartz.NewMock(t))
	if !q.push(1, 100) {
		t.Fatal("the first push was refused")
	}
	if q.push(2, 1) {
		t.Fatal("a push past the bound was taken")
	}
	if _, done, err := q.take(); !done || !errors.Is(err, ErrSlowSubscriber) {
		t.Fatalf("take = done %v, %v; want ErrSlowSubscriber", done, err)
	}
}

// TestStarterQueueWaitsThenStalls: the starter's full queue makes the push wait; a take lets it
// go on, and a starter that takes nothing for the stall fails it with ErrSlowSubscriber.
func TestStarterQueueWaitsThenStalls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := quartz.NewMock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	q := newBlockingQueue[int](100, time.Minute, clk)
	q.push(1, 100)
	pushed := make(chan bool, 1)
	go func() { pushed <- q.push(2, 100) }()
	trap.MustWait(ctx).MustRelease(ctx)
	if items, _, err := q.take(); err != nil || len(items) != 1 {
		t.Fatalf("take = %v, %v", items, err)
	}
	if !<-pushed {
		t.Fatal("the waiting push failed after a take made room")
	}

	go func() { pushed <- q.push(3, 100) }()
	// The push may wake early (a stale wake-up) and set its timer again: fire each until it
	// gives up.
	calls := make(chan *quartz.Call)
	trapCtx, stopTrap := context.WithCancel(ctx)
	defer stopTrap()
	go func() {
		for {
			call, err := trap.Wait(trapCtx)
			if err != nil {
				return
			}
			calls <- call
		}
	}()
	for waiting := true; waiting; {
		select {
		case ok := <-pushed:
			if ok {
				t.Fatal("a push to a starter that takes nothing was taken")
			}
			waiting = false
		case call := <-calls:
			call.MustRelease(ctx)
			clk.Advance(call.Duration).MustWait(ctx)
		case <-ctx.Done():
			t.Fatal("the push to a starter that takes nothing still waits")
		}
	}
	_, _, err := q.take()
	if !errors.Is(err, ErrSlowSubscriber) || !strings.Contains(err.Error(), "nothing was taken for 1m0s") {
		t.Fatalf("take = %v; want ErrSlowSubscriber saying how long nothing was taken", err)
	}
}

// TestCancelReleasesAWaitingPush: a subscriber that goes away releases the process's output
// waiting for room in its queue.
func TestCancelReleasesAWaitingPush(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := quartz.NewMock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	q := newBlockingQueue[int](100, time.Minute, clk)
	q.push(1, 100)
	pushed := make(chan bool, 1)
	go func() { pushed <- q.push(2, 100) }()
	trap.MustWait(ctx).MustRelease(ctx)
	q.cancel()
	select {
	case ok := <-pushed:
		if ok {
			t.Fatal("a push to a cancelled queue was taken")
		}
	case <-ctx.Done():
		t.Fatal("cancel did not release the waiting push")
	}
}
