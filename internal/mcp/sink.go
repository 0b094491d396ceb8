package mcp

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/serving"
)

// sink is the http.ResponseWriter the SDK writes a request's response through. It adds what
// the SDK leaves out on long streams: `X-Accel-Buffering: no`, headers sent as soon as a tool
// call's stream starts, and an SSE comment whenever the response, an open event stream, has
// been silent for keepAlive (so every keepAlive on a silent call, as on REST), timed by the
// Handler's clock. Every write has a deadline, so a client that stopped reading fails the
// write instead of holding it (the connection's deadlines are the wall clock's: the network's).
//
// The SDK writes from its own goroutines and the keep-alive from the sink's: mu serialises
// them, and each SDK event is a single Write, so a comment never lands inside an event.
type sink struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	reqDone      <-chan struct{} // the request's context: the client went away
	keepAlive    time.Duration
	writeTimeout time.Duration
	now          func() time.Time // the clock keep-alives are timed by

	mu          sync.Mutex // guards the fields below and every write to w
	wroteHeader bool
	sse         bool      // the response is an event stream (known once the header was written)
	last        time.Time // the last write
	err         error     // the first failed write
	closed      bool
	onClose     []func()
	deadline    serving.WriteDeadline

	// An event stream over HTTP/1.1 takes its connection over from net/http once its headers
	// are out, as REST's do (serving.Taken): the SDK's writes gather in buf, after
	// serving.ChunkRoom bytes of room, and each flush writes them as one chunk.
	taken *serving.TakenConns // set by mayTake: the response may be taken over
	left  func()              // ends the request's context: the client of a connection taken over went
	conn  *serving.Taken      // once taken over
	buf   []byte

	stop chan struct{} // closed by close: the keep-alive goroutine ends
	done chan struct{} // closed when the keep-alive goroutine has ended
}

// newSink is a sink whose keep-alives are timed by clock.
func newSink(w http.ResponseWriter, ctx context.Context, keepAlive, writeTimeout time.Duration, clock quartz.Clock) *sink {
	s := newQuietSink(w, ctx, keepAlive, writeTimeout, func() time.Time { return clock.Now("mcp", "keepalive") })
	go s.keepAlives(clock)
	return s
}

// newQuietSink is a sink whose keep-alives nobody sends yet: newSink starts them; tests call
// tick themselves, with their own clock.
func newQuietSink(w http.ResponseWriter, ctx context.Context, keepAlive, writeTimeout time.Duration, now func() time.Time) *sink {
	rc := http.NewResponseController(w)
	return &sink{w: w, rc: rc, reqDone: ctx.Done(), keepAlive: keepAlive, writeTimeout: writeTimeout,
		now: now, last: now(), stop: make(chan struct{}), done: make(chan struct{}),
		deadline: serving.WriteDeadline{Set: rc.SetWriteDeadline, Timeout: writeTimeout}}
}

// Header is the response's header. Only the SDK's goroutine serving the request touches it,
// before the header is written.
func (s *sink) Header() http.Header { return s.w.Header() }

func (s *sink) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeaderLocked(code)
}

func (s *sink) writeHeaderLocked(code int) {
	if s.wroteHeader {
		s.w.WriteHeader(code) // net/http logs the superfluous call, as it would without us
		return
	}
	s.wroteHeader = true
	if strings.HasPrefix(s.w.Header().Get("Content-Type"), "text/event-stream") && code == http.StatusOK {
		s.sse = true
		s.w.Header().Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer this response
		if s.taken != nil {
			s.w.Header().Set("Connection", "close")
		}
	}
	s.w.WriteHeader(code)
	if s.sse && s.taken != nil && s.rc.Flush() == nil {
		s.take()
	}
}

// mayTake lets the sink take its connection over, should the response be an event stream:
// call it before the SDK writes, for a request serving.Takes, with the request's context's
// cancel (the SDK sees the request under that context).
func (s *sink) mayTake(taken *serving.TakenConns, gone func()) {
	s.taken, s.left = taken, gone
}

// take takes the connection over, its headers flushed.
func (s *sink) take() {
	c := s.taken.Take(s.rc, s.left)
	if c == nil {
		return
	}
	s.conn = c
	s.deadline = serving.WriteDeadline{Set: c.SetWriteDeadline, Timeout: s.writeTimeout}
	s.buf = make([]byte, serving.ChunkRoom, 512)
}

// writeLocked writes b to the response: to buf, once the connection is taken over.
func (s *sink) writeLocked(b []byte) (int, error) {
	if s.conn == nil {
		return s.w.Write(b)
	}
	if s.err != nil {
		return 0, s.err
	}
	s.buf = append(s.buf, b...)
	return len(b), nil
}

func (s *sink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wroteHeader {
		s.writeHeaderLocked(http.StatusOK)
	}
	s.armLocked()
	n, err := s.writeLocked(b)
	s.noteLocked(err)
	return n, err
}

// FlushError flushes, for http.ResponseController (which the SDK uses).
func (s *sink) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

// Flush flushes, for code that asserts http.Flusher.
func (s *sink) Flush() { s.FlushError() }

func (s *sink) flushLocked() error {
	if !s.wroteHeader {
		s.writeHeaderLocked(http.StatusOK)
	}
	s.armLocked()
	var err error
	if s.conn != nil {
		s.buf, err = s.conn.WriteChunk(s.buf)
	} else {
		err = s.rc.Flush()
	}
	s.noteLocked(err)
	return err
}

// armLocked gives the next write a deadline writeTimeout from now (serving.WriteDeadline).
func (s *sink) armLocked() { s.deadline.Arm(time.Now()) }

func (s *sink) noteLocked(err error) {
	s.last = s.now()
	if err != nil && s.err == nil {
		s.err = err
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines, hijacking).
func (s *sink) Unwrap() http.ResponseWriter { return s.w }

// event writes one event, whole, to the response and flushes it, when the response is an open
// event stream; sent is false, nothing written, when it is not (its header not yet written, or
// not SSE, or closed). progress writes its output notifications with it (progresswire.go).
func (s *sink) event(b []byte) (sent bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wroteHeader || !s.sse || s.closed {
		return false, nil
	}
	if s.err != nil {
		return true, s.err
	}
	s.armLocked()
	_, err = s.writeLocked(b)
	s.noteLocked(err)
	if err == nil {
		err = s.flushLocked()
	}
	return true, err
}

// startStream says that the SDK has set this response's headers for an event stream and will
// not change them: the sink sends them at once, with an SSE comment (proxies that hold headers
// until the body's first bytes pass them on then), so that a quiet command does not leave the
// client and proxies waiting for a first byte. Tool handlers call it; the SDK sets the headers
// before it hands a call to its handler.
func (s *sink) startStream() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wroteHeader || s.err != nil || !strings.HasPrefix(s.w.Header().Get("Content-Type"), "text/event-stream") {
		return
	}
	s.writeHeaderLocked(http.StatusOK)
	s.commentLocked(": ok\n\n")
}

// failed returns the first write that failed, and whether it failed because the client did not
// take it in time.
func (s *sink) failed() (err error, slow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err, s.err != nil && errors.Is(s.err, os.ErrDeadlineExceeded)
}

// gone is closed when the client went away.
func (s *sink) gone() <-chan struct{} { return s.reqDone }

// whenClosed runs f once the request is over and its response written.
func (s *sink) whenClosed(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		f()
		return
	}
	s.onClose = append(s.onClose, f)
}

// close ends the keep-alives; the request's handler calls it once the SDK is done with the
// response, so nothing is written after.
func (s *sink) close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	s.closed = true
	if s.conn != nil {
		// What the SDK did not flush, the body's last chunk, and the connection's close.
		s.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		if s.err == nil {
			s.buf, _ = s.conn.WriteChunk(s.buf)
		}
		s.conn.End()
	} else {
		// net/http's own last write (the end of a chunked body) comes after us: give it time.
		s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	}
	fs := s.onClose
	s.onClose = nil
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (s *sink) keepAlives(clock quartz.Clock) {
	defer close(s.done)
	t := clock.NewTimer(s.keepAlive, "mcp", "keepalive")
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.reqDone:
			return
		case <-t.C:
			t.Reset(s.tick(), "mcp", "keepalive")
		}
	}
}

// tick sends a keep-alive comment when the stream is open and has been silent for keepAlive,
// and returns how long until the next one is due: keepAlive after the last write. (A fixed
// ticker would skip every other comment: a tick that comes a hair under keepAlive after the
// previous comment's write finds the stream not yet idle.)
func (s *sink) tick() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if idle := s.now().Sub(s.last); idle < s.keepAlive {
		return s.keepAlive - idle
	}
	if s.err == nil && s.sse {
		s.commentLocked(": keep-alive\n\n")
	}
	return s.keepAlive
}

// commentLocked writes an SSE comment and flushes it.
func (s *sink) commentLocked(c string) {
	s.armLocked()
	_, err := s.writeLocked([]byte(c))
	s.noteLocked(err)
	if err == nil {
		s.flushLocked()
	}
}
