package stream

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/stream/streamtest"
)

// goid is the calling goroutine's id.
func goid() int { return streamtest.Goroutine() }

// recorder is a Write that records every batch it was given and on which goroutine, and
// holds each call until released when hold is set.
type recorder struct {
	mu      sync.Mutex
	batches []string
	goids   []int
	hold    chan struct{} // nil: return at once
	called  chan struct{} // gets a value at each call (buffered)
	err     func() error  // the call's error; nil: none
}

func newRecorder(hold bool) *recorder {
	r := &recorder{called: make(chan struct{}, 16)}
	if hold {
		r.hold = make(chan struct{})
	}
	return r
}

func (r *recorder) write(items []Item) error {
	r.mu.Lock()
	r.batches = append(r.batches, join(items))
	r.goids = append(r.goids, goid())
	r.mu.Unlock()
	r.called <- struct{}{}
	if r.hold != nil {
		<-r.hold
	}
	if r.err != nil {
		return r.err()
	}
	return nil
}

func (r *recorder) seen() ([]string, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.batches...), append([]int(nil), r.goids...)
}

func waitCalled(t *testing.T, r *recorder) {
	t.Helper()
	select {
	case <-r.called:
	case <-time.After(waitTimeout):
		t.Fatal("write was not called")
	}
}

// renderStream opens a stream on a mock clock, paced at bytesPerSecond (0: unpaced), with a
// trap for its writer's idle timer.
func renderStream(t *testing.T, bytesPerSecond int64) (*quartz.Mock, *trapOf, *Stream) {
	clk := newClock(t)
	made := trap(t, clk.Trap().NewTimer("stream", "idle"))
	r, _ := newRegistry(t, Config{Clock: clk, BytesPerSecond: bytesPerSecond})
	return clk, made, open(t, r, Options{Kind: KindExec, Unpaced: bytesPerSecond == 0})
}

// finishRender finishes s and checks that Render returned ReasonDone.
func finishRender(t *testing.T, s *Stream, done <-chan Reason) {
	t.Helper()
	s.Finish()
	if reason := <-done; reason != ReasonDone {
		t.Fatalf("Render = %s, want %s", reason, ReasonDone)
	}
}

// startRender runs Render with a long idle and returns its result's channel once Render waits
// for the stream (its idle timer is armed): nothing is queued or in hand.
func startRender(t *testing.T, s *Stream, made *trapOf, write Write) <-chan Reason {
	t.Helper()
	done := make(chan Reason, 1)
	go func() { done <- s.Render(context.Background(), time.Hour, write) }()
	made.release(t)
	return done
}

// TestWriteThroughOnTheProducersGoroutine: an item SendWait gives a Render that waits with
// nothing queued is written by the producer's goroutine itself, before SendWait returns; the
// writer's goroutine is not woken for it.
func TestWriteThroughOnTheProducersGoroutine(t *testing.T) {
	t.Parallel()
	_, made, s := renderStream(t, 0)
	rec := newRecorder(false)
	done := startRender(t, s, made, rec.write)
	for _, line := range []string{"a\n", "b\n"} {
		var producer int
		if !func() bool {
			producer = goid()
			return s.SendWait(context.Background(), Item{Event: "stdout", Data: []byte(line)})
		}() {
			t.Fatalf("SendWait(%q) = false", line)
		}
		batches, goids := rec.seen()
		if len(batches) == 0 || batches[len(batches)-1] != line || goids[len(goids)-1] != producer {
			t.Fatalf("after SendWait(%q) returned: write saw %q on goroutines %v; want it on the producer's (%d)", line, batches, goids, producer)
		}
	}
	finishRender(t, s, done)
	if b, _ := rec.seen(); len(b) != 2 {
		t.Fatalf("write was called %d times (%q), want 2", len(b), b)
	}
}

// TestWriteThroughKeepsOrder: while Render holds a batch it took and has not yet written,
// SendWait queues (and returns) instead of writing through, and what it queued is written
// after that batch.
func TestWriteThroughKeepsOrder(t *testing.T) {
	t.Parallel()
	_, made, s := renderStream(t, 0)
	rec := newRecorder(true)
	done := startRender(t, s, made, rec.write)
	s.Send(Item{Event: "stdout", Data: []byte("first ")}) // queued: Render takes it
	waitCalled(t, rec)                                    // ... and is held writing it
	sent := make(chan bool, 1)
	go func() { sent <- s.SendWait(context.Background(), Item{Event: "stdout", Data: []byte("second")}) }()
	select {
	case ok := <-sent:
		if !ok {
			t.Fatal("SendWait = false")
		}
	case <-time.After(waitTimeout):
		close(rec.hold)
		t.Fatal("SendWait waited for Render's write of the batch it held, instead of queueing")
	}
	s.Finish()
	close(rec.hold)
	if reason := <-done; reason != ReasonDone {
		t.Fatalf("Render = %s, want %s", reason, ReasonDone)
	}
	if b, _ := rec.seen(); strings.Join(b, "") != "first second" {
		t.Fatalf("written %q, want first then second", b)
	}
}

// TestWriteThroughKeepsThePace: an item the pace does not allow at once is queued, and
// written by Render once the pace allows it.
func TestWriteThroughKeepsThePace(t *testing.T) {
	t.Parallel()
	clk, made, s := renderStream(t, 64<<10) // a burst of 4 KiB and a message
	paced := trap(t, clk.Trap().NewTimer("stream", "pace"))
	rec := newRecorder(false)
	done := startRender(t, s, made, rec.write)
	a, b := bytes.Repeat([]byte("a"), 4000), bytes.Repeat([]byte("b"), 4000)
	if !s.SendWait(context.Background(), Item{Data: a}) {
		t.Fatal("SendWait(a) = false")
	}
	if got, _ := rec.seen(); len(got) != 1 {
		t.Fatalf("after the first item, within the burst: %d writes, want 1 (through)", len(got))
	}
	if !s.SendWait(context.Background(), Item{Data: b}) {
		t.Fatal("SendWait(b) = false")
	}
	call := paced.wait(t) // Render took b and waits for the pace
	if got, _ := rec.seen(); len(got) != 1 {
		t.Fatalf("the second item was written before the pace allowed it (%d writes)", len(got))
	}
	fire(t, clk, call)
	waitCalled(t, rec)
	waitCalled(t, rec)
	finishRender(t, s, done)
	if got, _ := rec.seen(); strings.Join(got, "") != string(a)+string(b) {
		t.Fatalf("written %d batches, not a then b", len(got))
	}
}

// TestWriteThroughOnCreditReadsNoClockFirst: an item within what the limiter was left with at
// the last write through is written before anything reads the clock (a client waits for each
// line that comes this way); it is charged after, so the pace still holds (the test above).
func TestWriteThroughOnCreditReadsNoClockFirst(t *testing.T) {
	t.Parallel()
	clk, made, s := renderStream(t, 64<<10) // a burst of 4 KiB and a message
	rec := newRecorder(false)
	done := startRender(t, s, made, rec.write)
	if !s.SendWait(context.Background(), Item{Data: []byte("one\n")}) { // no credit yet: the clock decides
		t.Fatal("SendWait(one) = false")
	}
	nows, trapped := clk.Trap().Now(), true
	defer func() {
		if trapped { // a failure above
			nows.Close()
		}
	}()
	var sent bool
	sentDone := make(chan struct{})
	go func() {
		sent = s.SendWait(context.Background(), Item{Data: []byte("two\n")})
		close(sentDone)
	}()
	call := nextCall(t, nows, nil)
	if call == nil {
		t.FailNow()
	}
	if got, _ := rec.seen(); len(got) != 2 {
		t.Errorf("the clock was read with %d writes done, want 2: the second item waited for it", len(got))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for call != nil { // let the reads after the write go on, until SendWait returns
		if err := call.Release(ctx); err != nil {
			t.Fatal(err)
		}
		call = nextCall(t, nows, sentDone)
	}
	<-sentDone
	if !sent {
		t.Fatal("SendWait(two) = false")
	}
	nows.Close()
	trapped = false
	finishRender(t, s, done)
	if got, _ := rec.seen(); strings.Join(got, "") != "one\ntwo\n" {
		t.Fatalf("written %q, want one then two", got)
	}
}

// TestRenderWaitsForAWriteThrough: a stream ended while a producer writes through does not let
// Render return (after which its caller writes to the client itself) until that write ended.
func TestRenderWaitsForAWriteThrough(t *testing.T) {
	t.Parallel()
	_, made, s := renderStream(t, 0)
	rec := newRecorder(true)
	done, renderer := make(chan Reason, 1), make(chan int, 1)
	go func() {
		renderer <- goid()
		done <- s.Render(context.Background(), time.Hour, rec.write)
	}()
	made.release(t)
	sent := make(chan bool, 1)
	go func() { sent <- s.SendWait(context.Background(), Item{Data: []byte("x")}) }()
	waitCalled(t, rec)
	s.End(ReasonRevoked)
	// Render must now be waiting for the write (for wmu), not returned: look at its stack.
	id := <-renderer
	deadline := time.Now().Add(waitTimeout)
	for !goroutineIn(id, "sync.(*Mutex).Lock", "stream.(*Stream).Render") {
		select {
		case reason := <-done:
			t.Fatalf("Render returned %s while a write-through was under way", reason)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Render neither returned nor waited for the write-through")
		}
		runtime.Gosched()
	}
	close(rec.hold)
	if reason := <-done; reason != ReasonRevoked {
		t.Fatalf("Render = %s, want %s", reason, ReasonRevoked)
	}
	if !<-sent {
		t.Fatal("SendWait = false for an item written before the end")
	}
}

// TestWriteThroughFailure: a write-through that fails (ending the stream, as a Write does)
// makes SendWait report false and Render return the stream's reason.
func TestWriteThroughFailure(t *testing.T) {
	t.Parallel()
	_, made, s := renderStream(t, 0)
	rec := newRecorder(false)
	rec.err = func() error { s.EndSlow(SlowWriteTimeout); return errors.New("write: i/o timeout") }
	done := startRender(t, s, made, rec.write)
	if s.SendWait(context.Background(), Item{Data: []byte("x")}) {
		t.Fatal("SendWait = true though its write failed")
	}
	if reason := <-done; reason != ReasonSlow {
		t.Fatalf("Render = %s, want %s", reason, ReasonSlow)
	}
}

// goroutineIn reports whether goroutine id's stack holds every one of fns.
func goroutineIn(id int, fns ...string) bool {
	buf := make([]byte, 1<<20)
	prefix := "goroutine " + strconv.Itoa(id) + " ["
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.HasPrefix(g, prefix) {
			continue
		}
		for _, fn := range fns {
			if !strings.Contains(g, fn) {
				return false
			}
		}
		return true
	}
	return false
}

// trapOf is a quartz trap closed at the test's end.
type trapOf struct{ *quartz.Trap }

func trap(t *testing.T, tr *quartz.Trap) *trapOf {
	t.Cleanup(tr.Close)
	return &trapOf{tr}
}

// wait returns the next call the trap caught.
func (tr *trapOf) wait(t *testing.T) *quartz.Call {
	t.Helper()
	call := nextCall(t, tr.Trap, nil)
	if call == nil {
		t.FailNow()
	}
	return call
}

// release lets the next call the trap caught go on.
func (tr *trapOf) release(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := tr.wait(t).Release(ctx); err != nil {
		t.Fatal(err)
	}
}
