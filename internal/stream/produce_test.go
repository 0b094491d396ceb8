package stream

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// produceStream opens a stream on a mock clock, paced at bytesPerSecond (0: unpaced).
func produceStream(t *testing.T, cfg Config, bytesPerSecond int64) (*Stream, Config) {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = newClock(t)
	}
	cfg.BytesPerSecond = bytesPerSecond
	r, _ := newRegistry(t, cfg)
	return open(t, r, Options{Kind: KindExec, Unpaced: bytesPerSecond == 0}), cfg
}

// TestProduceWritesOnTheCallersGoroutine: every item is written on Produce's own goroutine,
// in order, before SendWait returns; then Produce returns ReasonDone.
func TestProduceWritesOnTheCallersGoroutine(t *testing.T) {
	t.Parallel()
	s, _ := produceStream(t, Config{}, 0)
	rec := newRecorder(false)
	me := goid()
	reason := s.Produce(context.Background(), 0, rec.write, func(ctx context.Context) {
		for i, line := range []string{"a\n", "b\n", "c\n"} {
			if !s.SendWait(ctx, Item{Data: []byte(line)}) {
				t.Errorf("SendWait(%q) = false", line)
			}
			if got, _ := rec.seen(); len(got) != i+1 {
				t.Errorf("after SendWait(%q): %d writes, want %d", line, len(got), i+1)
			}
		}
	}, nil)
	if reason != ReasonDone {
		t.Fatalf("Produce = %s, want %s", reason, ReasonDone)
	}
	got, ids := rec.seen()
	if strings.Join(got, "") != "a\nb\nc\n" {
		t.Errorf("written %q, want a b c in order", got)
	}
	for _, id := range ids {
		if id != me {
			t.Errorf("a write ran on goroutine %d, not Produce's caller's (%d)", id, me)
		}
	}
}

// TestProduceKeepsThePace: an item the pace does not allow at once waits, with its producer,
// until the pace allows it; nothing is lost or reordered.
func TestProduceKeepsThePace(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	paced := trap(t, clk.Trap().NewTimer("stream", "pace"))
	s, _ := produceStream(t, Config{Clock: clk}, 64<<10) // a burst of 4 KiB and a message
	rec := newRecorder(false)
	a, b := bytes.Repeat([]byte("a"), 4000), bytes.Repeat([]byte("b"), 4000)
	sentB := make(chan bool, 1)
	done := make(chan Reason, 1)
	go func() {
		done <- s.Produce(context.Background(), 0, rec.write, func(ctx context.Context) {
			s.SendWait(ctx, Item{Data: a})
			sentB <- s.SendWait(ctx, Item{Data: b})
		}, nil)
	}()
	call := paced.wait(t) // b waits for the pace
	select {
	case <-sentB:
		t.Fatal("SendWait(b) returned before the pace allowed b")
	default:
	}
	if got, _ := rec.seen(); len(got) != 1 {
		t.Fatalf("%d writes before the pace allowed b, want 1 (a)", len(got))
	}
	fire(t, clk, call)
	if !<-sentB {
		t.Fatal("SendWait(b) = false")
	}
	if reason := <-done; reason != ReasonDone {
		t.Fatalf("Produce = %s, want %s", reason, ReasonDone)
	}
	if got, _ := rec.seen(); strings.Join(got, "") != string(a)+string(b) {
		t.Fatal("not a then b")
	}
}

// TestProduceEndCancelsTheProducer: an end cancels the producer's context at once, with the
// cause the caller maps the reason to (nil: not cancelled), and Produce returns the reason.
func TestProduceEndCancelsTheProducer(t *testing.T) {
	t.Parallel()
	errKill := errors.New("kill")
	cause := func(r Reason) error {
		if r == ReasonFailed {
			return nil // left to its own end
		}
		return errKill
	}
	for _, tc := range []struct {
		reason    Reason
		cancelled bool
	}{{ReasonRevoked, true}, {ReasonFailed, false}} {
		s, _ := produceStream(t, Config{}, 0)
		var got error
		reason := s.Produce(context.Background(), 0, newRecorder(false).write, func(ctx context.Context) {
			s.End(tc.reason)
			got = context.Cause(ctx) // the cancel is synchronous: no wait
			if s.SendWait(ctx, Item{Data: []byte("x")}) {
				t.Errorf("%s: SendWait = true on an ended stream", tc.reason)
			}
		}, cause)
		if reason != tc.reason {
			t.Errorf("Produce = %s, want %s", reason, tc.reason)
		}
		if tc.cancelled && !errors.Is(got, errKill) || !tc.cancelled && got != nil {
			t.Errorf("%s: the producer's cause is %v, want cancelled %v", tc.reason, got, tc.cancelled)
		}
	}
}

// TestProduceClientGone: the client's context ending ends the stream (ReasonClient) and
// cancels the producer with *Ended when no cause is given.
func TestProduceClientGone(t *testing.T) {
	t.Parallel()
	s, _ := produceStream(t, Config{}, 0)
	ctx, leave := context.WithCancel(context.Background())
	reason := s.Produce(ctx, 0, newRecorder(false).write, func(pctx context.Context) {
		leave()
		<-pctx.Done() // a producer blocked in its read
		var ended *Ended
		if !errors.As(context.Cause(pctx), &ended) || ended.Reason != ReasonClient {
			t.Errorf("the producer's cause is %v, want the client's end", context.Cause(pctx))
		}
	}, nil)
	if reason != ReasonClient {
		t.Fatalf("Produce = %s, want %s", reason, ReasonClient)
	}
}

// TestProduceWriteFails: a write that fails ends the stream (as a Write does), which stops
// the producer; Produce returns the write's reason.
func TestProduceWriteFails(t *testing.T) {
	t.Parallel()
	s, _ := produceStream(t, Config{}, 0)
	rec := newRecorder(false)
	rec.err = func() error { s.EndSlow(SlowWriteTimeout); return errors.New("write: i/o timeout") }
	reason := s.Produce(context.Background(), 0, rec.write, func(ctx context.Context) {
		if s.SendWait(ctx, Item{Data: []byte("x")}) {
			t.Error("SendWait = true though its write failed")
		}
		if ctx.Err() == nil {
			t.Error("the producer's context is not cancelled after its write failed")
		}
	}, nil)
	if reason != ReasonSlow {
		t.Fatalf("Produce = %s, want %s", reason, ReasonSlow)
	}
}

// TestProduceKeepAlive: with nothing written for idle, the timer writes a keep-alive, again
// every idle; an item written meanwhile puts the next one off; none comes after Produce.
func TestProduceKeepAlive(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	armed := trap(t, clk.Trap().AfterFunc("stream", "keep-alive"))
	reset := trap(t, clk.Trap().TimerReset("stream", "keep-alive"))
	s, _ := produceStream(t, Config{Clock: clk}, 0)
	rec := newRecorder(false)
	const idle = 15 * time.Second
	proceed, finish := make(chan struct{}), make(chan struct{})
	done := make(chan Reason, 1)
	go func() {
		done <- s.Produce(context.Background(), idle, rec.write, func(ctx context.Context) {
			<-proceed
			s.SendWait(ctx, Item{Data: []byte("x")})
			<-finish
		}, nil)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	armed.release(t)
	w := clk.Advance(idle) // nothing written yet: a keep-alive
	reset.release(t)
	w.MustWait(ctx)
	if got, _ := rec.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("after %s idle: writes %q, want one keep-alive", idle, got)
	}
	clk.Advance(5 * time.Second).MustWait(ctx)
	close(proceed)
	waitCalled(t, rec)
	waitCalled(t, rec)                // the keep-alive's call was counted first
	w = clk.Advance(10 * time.Second) // 10 s after x: not idle yet
	call := reset.wait(t)
	if call.Duration != 5*time.Second {
		t.Errorf("the keep-alive was put off by %s, want 5s (idle since x)", call.Duration)
	}
	if err := call.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.MustWait(ctx)
	if got, _ := rec.seen(); len(got) != 2 {
		t.Fatalf("writes %q, want a keep-alive and x only", got)
	}
	close(finish)
	if reason := <-done; reason != ReasonDone {
		t.Fatalf("Produce = %s, want %s", reason, ReasonDone)
	}
	clk.Advance(time.Hour).MustWait(ctx)
	if got, _ := rec.seen(); len(got) != 2 {
		t.Fatalf("writes %q after Produce returned, want none more", got)
	}
}

// TestProduceCapAndBigItems: under Produce, big items are cut on characters and the byte cap
// holds, with its notice last, as under Render.
func TestProduceCapAndBigItems(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	autoPace(t, clk)
	s, _ := produceStream(t, Config{Clock: clk, MaxBytes: 100 << 10}, 1<<20)
	var got []string // each batch's text, and the cap's notice as its event name
	write := func(items []Item) error {
		var b strings.Builder
		for _, it := range items {
			b.Write(it.Data)
			if it.Event == EventCapped {
				b.WriteString(EventCapped)
			}
		}
		got = append(got, b.String())
		return nil
	}
	big := []byte(strings.Repeat("é", 40<<10)) // 80 KiB: cut into parts of at most the chunk
	reason := s.Produce(context.Background(), 0, write, func(ctx context.Context) {
		for range 2 {
			if !s.SendWait(ctx, Item{Data: big}) {
				t.Error("SendWait = false")
			}
		}
	}, nil)
	if reason != ReasonDone {
		t.Fatalf("Produce = %s, want %s", reason, ReasonDone)
	}
	all := strings.Join(got, "")
	if !strings.HasSuffix(all, EventCapped) || len(all)-len(EventCapped) != 100<<10 {
		t.Errorf("written %d bytes, ending %q; want the cap's 100 KiB, then the notice", len(all), all[max(0, len(all)-10):])
	}
	for _, b := range got {
		if !utf8Valid([]byte(strings.TrimSuffix(b, EventCapped))) {
			t.Error("a part was cut inside a character")
		}
	}
	if capped, dropped := s.Capped(); !capped || dropped != 2*int64(len(big))-100<<10 {
		t.Errorf("Capped = %v, %d; want true, %d", capped, dropped, 2*int64(len(big))-100<<10)
	}
}
