package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told, and a millisecond each time it is read (as a
// write takes time on a real one).
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time {
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// TestSinkOpensAtOnce: a tool call's event stream has its headers (and a first comment) out
// as soon as the call starts, not at the first keep-alive.
func TestSinkOpensAtOnce(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/event-stream")
	clock := &fakeClock{t: time.Unix(0, 0)}
	s := newQuietSink(rec, context.Background(), 15*time.Second, time.Second, clock.now)
	s.startStream()
	if !rec.Flushed || rec.Code != http.StatusOK || rec.Body.String() != ": ok\n\n" {
		t.Errorf("after startStream: flushed %v, status %d, body %q; want the headers and a comment sent", rec.Flushed, rec.Code, rec.Body)
	}
	if got := rec.Header().Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q", got)
	}
}

// TestSinkKeepAliveEveryInterval drives the keep-alive loop with a fake clock over a silent
// minute: a comment every 15 s from the start (15, 30, 45, 60), none skipped (a fixed ticker
// found the stream a hair short of idle every other tick, and skipped it).
func TestSinkKeepAliveEveryInterval(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/event-stream")
	clock := &fakeClock{t: time.Unix(0, 0)}
	start := clock.t
	const interval = 15 * time.Second
	s := newQuietSink(rec, context.Background(), interval, time.Second, clock.now)
	s.startStream()
	var at []time.Duration
	for wait := interval; clock.t.Add(wait).Sub(start) < time.Minute+interval/2; {
		// The keep-alive goroutine's timer fires, a hair early: the sink takes a write's time
		// after the write, so a timer armed before it fires just under an interval after it.
		clock.t = clock.t.Add(max(wait-2*time.Millisecond, time.Millisecond))
		before := strings.Count(rec.Body.String(), ": keep-alive\n\n")
		wait = s.tick()
		if strings.Count(rec.Body.String(), ": keep-alive\n\n") > before {
			at = append(at, clock.t.Sub(start).Round(time.Second))
		}
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second, time.Minute}
	if len(at) != len(want) {
		t.Fatalf("keep-alives at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("keep-alives at %v, want %v", at, want)
		}
	}
}

// TestSinkKeepAliveAfterLastWrite: output resets the interval; the next comment comes a whole
// interval after it.
func TestSinkKeepAliveAfterLastWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/event-stream")
	clock := &fakeClock{t: time.Unix(0, 0)}
	s := newQuietSink(rec, context.Background(), 15*time.Second, time.Second, clock.now)
	s.startStream()
	clock.t = clock.t.Add(10 * time.Second)
	s.Write([]byte("event: message\ndata: {}\n\n"))
	clock.t = clock.t.Add(5 * time.Second)
	if wait := s.tick(); wait < 9*time.Second || wait > 10*time.Second || strings.Contains(rec.Body.String(), "keep-alive") {
		t.Errorf("5 s after output: next keep-alive in %v (want about 10 s), body %q", wait, rec.Body)
	}
}
