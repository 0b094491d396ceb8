package stream

import (
	"context"
	"errors"
	"testing"
)

// TestCoalesce: a coalesced stream hands out its first item at once; items that come sooner
// than the window after it wait for the window's end and go out as one, the newest; once a
// quiet window has passed, the next goes out at once again.
func TestCoalesce(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	timers := clk.Trap().NewTimer("stream", "coalesce")
	defer timers.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindEvents, Unpaced: true, Coalesce: UpdateEvery})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	next := func() <-chan string {
		got := make(chan string, 1)
		go func() {
			items, err := s.Next(ctx, 0)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- join(items)
		}()
		return got
	}

	s.Send(Item{Data: []byte("1")})
	if got := <-next(); got != "1" {
		t.Fatalf("first batch = %q, want item 1 at once", got)
	}
	s.Send(Item{Data: []byte("2")})
	got := next()
	call := nextCall(t, timers, nil) // 2 came within the window: it waits
	if call.Duration != UpdateEvery {
		t.Errorf("waits %v, want the whole window %v", call.Duration, UpdateEvery)
	}
	s.Send(Item{Data: []byte("3")}) // and 3 while it waits
	fire(t, clk, call)
	if b := <-got; b != "3" {
		t.Errorf("second batch = %q, want the newest item alone", b)
	}
	if err := clk.Advance(UpdateEvery).Wait(ctx); err != nil { // a quiet window
		t.Fatal(err)
	}
	s.Send(Item{Data: []byte("4")})
	if b := <-next(); b != "4" {
		t.Errorf("third batch = %q, want item 4 at once", b)
	}
}

// TestCoalesceEndsItsWait: a stream ended while its writer waits out the window ends the wait.
func TestCoalesceEndsItsWait(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	timers := clk.Trap().NewTimer("stream", "coalesce")
	defer timers.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindEvents, Unpaced: true, Coalesce: UpdateEvery})
	s.Send(Item{Data: []byte("1")})
	if _, err := s.Next(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	s.Send(Item{Data: []byte("2")})
	errc := make(chan error, 1)
	go func() { _, err := s.Next(context.Background(), 0); errc <- err }()
	call := nextCall(t, timers, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := call.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.End(ReasonRevoked)
	var ended *Ended
	if err := <-errc; !errors.As(err, &ended) || ended.Reason != ReasonRevoked {
		t.Errorf("Next = %v, want the stream's end (revoked)", err)
	}
}

// TestCoalescedIsNotWrittenThrough: SendWait never writes a coalesced stream's item itself,
// past the window: a second item within the window waits for it under Render too.
func TestCoalescedIsNotWrittenThrough(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	timers := clk.Trap().NewTimer("stream", "coalesce")
	defer timers.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindWatch, Unpaced: true, Coalesce: UpdateEvery})
	rec := newRecorder(false)
	done := make(chan Reason, 1)
	go func() { done <- s.Render(context.Background(), 0, rec.write) }()
	s.SendWait(context.Background(), Item{Data: []byte("1")})
	<-rec.called
	s.SendWait(context.Background(), Item{Data: []byte("2")})
	fire(t, clk, nextCall(t, timers, nil)) // 2 waits for the window, written or not
	<-rec.called
	s.Finish()
	if reason := <-done; reason != ReasonDone {
		t.Errorf("Render = %s, want done", reason)
	}
	if batches, _ := rec.seen(); len(batches) != 2 || batches[0] != "1" || batches[1] != "2" {
		t.Errorf("batches %q, want 1 then 2", batches)
	}
}

// TestDue: a producer's Due returns at once before the writer's first batch and once a window
// has passed since its last, waits out the rest of the window otherwise, and gives up when the
// stream ends.
func TestDue(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	timers := clk.Trap().NewTimer("stream", "coalesce")
	defer timers.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindEvents, Unpaced: true, Coalesce: UpdateEvery})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if !s.Due(ctx) {
		t.Fatal("Due before any batch = false, want true at once")
	}
	s.Send(Item{Data: []byte("1")})
	if _, err := s.Next(ctx, 0); err != nil {
		t.Fatal(err)
	}
	due := make(chan bool, 1)
	go func() { due <- s.Due(ctx) }()
	call := nextCall(t, timers, nil)
	if call.Duration != UpdateEvery {
		t.Errorf("Due waits %v, want the window %v", call.Duration, UpdateEvery)
	}
	fire(t, clk, call)
	if !<-due {
		t.Error("Due after the window = false, want true")
	}
	s.Send(Item{Data: []byte("2")}) // the window has passed: at once
	if items, err := s.Next(ctx, 0); err != nil || join(items) != "2" {
		t.Fatalf("Next after Due = %q, %v; want 2 at once", join(items), err)
	}
	go func() { due <- s.Due(ctx) }()
	nextCall(t, timers, nil).MustRelease(ctx)
	s.End(ReasonRevoked)
	if <-due {
		t.Error("Due of an ended stream = true, want false")
	}
}
