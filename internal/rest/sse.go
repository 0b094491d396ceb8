package rest

import (
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
type sseWriter struct {
	w        http.ResponseWriter // once open, the writer under the middleware's (direct)
	rc       *http.ResponseController
	flush    func() error // w's flush; nil: rc.Flush
	buf      *[]byte      // from bufs; nil once released
	deadline serving.WriteDeadline
}

// bufs keeps batch buffers between responses, so a stream's events cost no allocation once its
// buffer has grown to its usual batch.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxKeptBuf is the largest buffer put back in bufs: a rare huge batch is not kept for good.
const maxKeptBuf = 256 << 10

// startSSE sends the stream's headers and flushes them, so the client sees the stream open at
// once. Call release when done.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	s := newSSE(w)
	return s, s.open()
}

// newSSE is an SSE writer that has sent nothing yet: open sends the headers. Call release
// when done.
func newSSE(w http.ResponseWriter) *sseWriter {
	rc := http.NewResponseController(w)
	return &sseWriter{w: w, rc: rc, buf: bufs.Get().(*[]byte), deadline: serving.WriteDeadline{RC: rc, Timeout: writeTimeout}}
}

// open sends the stream's headers and flushes them.
func (s *sseWriter) open() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer this response
	s.w.WriteHeader(http.StatusOK)
	s.w, s.flush = direct(s.w)
	return s.send()
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

// release gives the writer's buffer back; the writer is not used after.
func (s *sseWriter) release() {
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
	s := &sseWriter{w: w, rc: rc, buf: bufs.Get().(*[]byte), deadline: serving.WriteDeadline{RC: rc, Timeout: writeTimeout}}
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
