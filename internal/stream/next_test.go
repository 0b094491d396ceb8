package stream

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestIdleTimerMadeOnce: a writer that waits between items, as on every line of a streamed
// command, arms one idle timer for the stream's life (made at its first wait, reset at the
// next), and a wait that ended with an item does not leave a tick that ends the next wait at
// once.
func TestIdleTimerMadeOnce(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	made := clk.Trap().NewTimer("stream", "idle")
	defer made.Close()
	reset := clk.Trap().TimerReset("stream", "idle")
	defer reset.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindExec, Unpaced: true})
	type result struct {
		batch []Item
		err   error
	}
	next := func() <-chan result {
		got := make(chan result, 1)
		go func() {
			batch, err := s.Next(context.Background(), 10*time.Second)
			got <- result{append([]Item(nil), batch...), err}
		}()
		return got
	}
	release := func(trap *quartz.Trap) *quartz.Call {
		call := nextCall(t, trap, nil)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := call.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return call
	}

	// First wait: the timer is made. An item ends the wait.
	got := next()
	release(made)
	s.Send(Item{Event: "stdout", Data: []byte("a")})
	if res := <-got; res.err != nil || len(res.batch) != 1 || string(res.batch[0].Data) != "a" {
		t.Fatalf("Next = %v, %v; want the item", res.batch, res.err)
	}
	// Second wait: the same timer, reset; it fires once the whole idle passed, not at once.
	got = next()
	call := release(reset)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := clk.Advance(call.Duration).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-got; res.err != nil || len(res.batch) != 0 {
		t.Fatalf("Next on an idle stream = %v, %v; want an empty batch", res.batch, res.err)
	}
	// Third wait: reset again; the end of the stream ends it.
	got = next()
	release(reset)
	s.Finish()
	if res := <-got; res.err != io.EOF {
		t.Fatalf("Next after Finish = %v, %v; want io.EOF", res.batch, res.err)
	}
}

// BenchmarkSendNext is one line's way through a stream: a producer's SendWait and the
// writer's Next, one item per batch, as a command printing a line at a time.
func BenchmarkSendNext(b *testing.B) {
	r := New(Config{Clock: quartz.NewReal(), BytesPerSecond: 1 << 20})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a"), Unpaced: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	line := []byte("L 1 1764522000.123456\n")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s.SendWait(ctx, Item{Event: "stdout", Data: line})
		if batch, err := s.Next(ctx, 15*time.Second); err != nil || len(batch) != 1 {
			b.Fatal(batch, err)
		}
	}
}

// BenchmarkSendNextWaiting is BenchmarkSendNext with the writer waiting in Next for each line
// (its idle timer armed), as it does between a command's lines: a hand-off per line.
func BenchmarkSendNextWaiting(b *testing.B) {
	r := New(Config{Clock: quartz.NewReal(), BytesPerSecond: 1 << 20})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a"), Unpaced: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	line := []byte("L 1 1764522000.123456\n")
	ctx := context.Background()
	took := make(chan struct{})
	go func() {
		defer close(took)
		for {
			if _, err := s.Next(ctx, 15*time.Second); err != nil {
				return
			}
			took <- struct{}{}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		s.SendWait(ctx, Item{Event: "stdout", Data: line})
		<-took
	}
	b.StopTimer()
	s.Finish()
	for range took {
	}
}

// BenchmarkRenderWriteThrough is one line's way through a stream under Render: the producer's
// SendWait finds the writer waiting and writes the line itself (render.go), as a command's
// lines do when the client keeps up.
func BenchmarkRenderWriteThrough(b *testing.B) {
	r := New(Config{Clock: quartz.NewReal(), BytesPerSecond: 1 << 20})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a"), Unpaced: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	line := []byte("L 1 1764522000.123456\n")
	ctx := context.Background()
	wrote := make(chan struct{}, 1)
	done := make(chan Reason)
	go func() {
		done <- s.Render(ctx, 15*time.Second, func(items []Item) error {
			if len(items) > 0 {
				wrote <- struct{}{}
			}
			return nil
		})
	}()
	b.ReportAllocs()
	for b.Loop() {
		s.SendWait(ctx, Item{Event: "stdout", Data: line})
		<-wrote
	}
	b.StopTimer()
	s.Finish()
	<-done
}
