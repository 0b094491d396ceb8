package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/serving"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// keepAliveInterval is how often an idle SSE stream gets a comment, so proxies do not time the
// connection out.
const keepAliveInterval = 15 * time.Second

// writeTimeout bounds each write to a streaming client. A client that has not taken a write in
// this long has stopped reading: it is dropped (stream.ReasonSlow) rather than held.
const writeTimeout = 30 * time.Second

// sseWriter writes Server-Sent Events. Only the handler's goroutine uses it. Events are
// gathered in buf and go out together with send: one write deadline, one write and one flush
// per batch, however many events it holds.
//
// Over HTTP/1.1 the writer takes the connection over from net/http once the headers are out
// (take), and writes each batch to it itself, as one chunk of the response's chunked body in
// one write: net/http's response writer, its buffers and its chunk writer were most of a line's
// way from hangar to its client (bench/README.md). The response says "Connection: close", as
// the connection closes at its end. Over HTTP/2, or a writer that cannot be taken over, it
// writes through net/http.
type sseWriter struct {
	w        http.ResponseWriter // once open, the writer under the middleware's (direct)
	rc       *http.ResponseController
	flush    func() error // w's flush; nil: rc.Flush
	buf      *[]byte      // from bufs; nil once released
	deadline serving.WriteDeadline

	taken  *serving.TakenConns // the server's connections taken over; nil: this one is not (serving.Takes)
	ctx    context.Context
	cancel context.CancelFunc
	conn   *serving.Taken // once taken over; buf's first serving.ChunkRoom bytes are kept for the chunk's size
}

// bufs keeps batch buffers between responses, so a stream's events cost no allocation once its
// buffer has grown to its usual batch.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxKeptBuf is the largest buffer put back in bufs: a rare huge batch is not kept for good.
const maxKeptBuf = 256 << 10

// startSSE sends the stream's headers and flushes them, so the client sees the stream open at
// once. Call release when done; the stream is sse.context's.
func (a *api) startSSE(w http.ResponseWriter, r *http.Request) (*sseWriter, error) {
	s := a.newSSE(w, r)
	return s, s.open()
}

// newSSE is an SSE writer answering r that has sent nothing yet: open sends the headers. Call
// release when done.
func (a *api) newSSE(w http.ResponseWriter, r *http.Request) *sseWriter {
	rc := http.NewResponseController(w)
	ctx, cancel := context.WithCancel(r.Context())
	s := &sseWriter{w: w, rc: rc, buf: bufs.Get().(*[]byte), deadline: serving.WriteDeadline{Set: rc.SetWriteDeadline, Timeout: writeTimeout},
		ctx: ctx, cancel: cancel}
	if serving.Takes(r) {
		s.taken = a.Taken
	}
	return s
}

// context is the request's context, which also ends when the client of a connection taken
// over goes: what the stream's writer runs under.
func (s *sseWriter) context() context.Context { return s.ctx }

// open sends the stream's headers and flushes them, then takes the connection over when it can.
func (s *sseWriter) open() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer this response
	if s.taken != nil {
		h.Set("Connection", "close")
	}
	s.w.WriteHeader(http.StatusOK)
	s.w, s.flush = direct(s.w)
	if err := s.send(); err != nil {
		return err
	}
	if s.taken != nil {
		s.take()
	}
	return nil
}

// take takes the connection over from net/http, its headers sent: from now on each send
// writes a chunk to it, release ends it, and the writer's context ends when the client goes,
// as net/http's own read ends the request's.
func (s *sseWriter) take() {
	c := s.taken.Take(s.rc, s.cancel)
	if c == nil {
		return
	}
	s.conn = c
	s.deadline = serving.WriteDeadline{Set: c.SetWriteDeadline, Timeout: writeTimeout}
	*s.buf = append((*s.buf)[:0], make([]byte, serving.ChunkRoom)...)
}

// direct is the writer under w's wrappers (the middleware's, which http.ResponseController
// unwraps at each call), and its flush when it has one: each event of a stream is a write and
// a flush, and a client waits for each. Call it once the status is sent, so the wrappers have
// seen all they look at (the metrics' status).
func direct(w http.ResponseWriter) (http.ResponseWriter, func() error) {
	for {
		if f, ok := w.(interface{ FlushError() error }); ok {
			return w, f.FlushError
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w, nil
		}
		w = u.Unwrap()
	}
}

// release ends the response (a connection taken over gets the body's last chunk and is
// closed) and gives the writer's buffer back; the writer is not used after.
func (s *sseWriter) release() {
	if s.conn != nil {
		s.conn.End()
		s.conn = nil
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.buf != nil && cap(*s.buf) <= maxKeptBuf {
		*s.buf = (*s.buf)[:0]
		bufs.Put(s.buf)
	}
	s.buf = nil
}

// event adds one event whose data is v marshalled as one JSON line. Call send to send it.
func (s *sseWriter) event(name, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.rawEvent(name, id, b)
	return nil
}

// rawEvent adds one event whose data is already one line of JSON.
func (s *sseWriter) rawEvent(name, id string, data []byte) {
	b := s.head(name, id)
	b = append(b, data...)
	*s.buf = append(b, "\n\n"...)
}

// outputEvent adds one output event: data is {"data": the text} or, for bytes that are not
// UTF-8, {"data": base64, "encoding": "base64"} (wire.Output, written without reflection).
func (s *sseWriter) outputEvent(name, id string, data []byte) {
	b := append(s.head(name, id), `{"data":`...)
	if utf8.Valid(data) {
		b = appendJSONString(b, data)
		b = append(b, '}')
	} else {
		b = append(b, '"')
		b = append(b, base64Std(data)...)
		b = append(b, `","encoding":"base64"}`...)
	}
	*s.buf = append(b, "\n\n"...)
}

func (s *sseWriter) head(name, id string) []byte {
	b := *s.buf
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	return append(b, "data: "...)
}

// closeEvent adds a stream's last event, close, giving the reason it ended; a stream that
// finished (its own last event said so), lost its client or was dropped as slow gets none.
func (s *sseWriter) closeEvent(reason stream.Reason) {
	if reason != stream.ReasonDone && reason != stream.ReasonClient && reason != stream.ReasonSlow {
		s.event("close", "", wire.Close{Reason: string(reason)})
	}
}

// writeClose ends an SSE stream that this replica forwards from another (forward.Forwarder.To)
// and ends itself, as it ends its own: with the close event.
func writeClose(w http.ResponseWriter, reason stream.Reason) {
	rc := http.NewResponseController(w)
	s := &sseWriter{w: w, rc: rc, buf: bufs.Get().(*[]byte), deadline: serving.WriteDeadline{Set: rc.SetWriteDeadline, Timeout: writeTimeout}}
	defer s.release()
	s.closeEvent(reason)
	s.send()
}

// comment adds an SSE comment (a keep-alive).
func (s *sseWriter) comment(text string) {
	*s.buf = append(append(append(*s.buf, ": "...), text...), "\n\n"...)
}

// send writes and flushes what was added since the last send, under one write deadline
// (writeTimeout from now, give or take a second: serving.WriteDeadline).
func (s *sseWriter) send() error {
	s.deadline.Arm(time.Now()) // the wall clock: the kernel keeps a connection's write deadline
	if s.conn != nil {
		var err error
		*s.buf, err = s.conn.WriteChunk(*s.buf)
		return err
	}
	b := *s.buf
	*s.buf = b[:0]
	if len(b) > 0 {
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	if s.flush != nil {
		return s.flush()
	}
	return s.rc.Flush()
}

// timedOut reports whether a write failed because the client did not take it in time.
func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// appendJSONString appends s, valid UTF-8, as a JSON string exactly as encoding/json writes it,
// HTML-safe (wire.AppendJSONString).
func appendJSONString(b, s []byte) []byte { return wire.AppendJSONString(b, s, true) }
