package rest

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"
)

// keepAliveInterval is how often an idle SSE stream gets a comment, so proxies do not time the
// connection out.
const keepAliveInterval = 15 * time.Second

// writeTimeout bounds each write to a streaming client. A client that has not taken a write in
// this long has stopped reading: it is dropped (stream.ReasonSlow) rather than held.
const writeTimeout = 30 * time.Second

// sseWriter writes Server-Sent Events. Only the handler's goroutine uses it.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE sends the stream's headers and flushes them, so the client sees the stream open at
// once.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer this response
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	return s, s.flush()
}

// event writes one event; data is marshalled as one JSON line. Call flush to send.
func (s *sseWriter) event(name, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if name != "" {
		sb.WriteString("event: " + name + "\n")
	}
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	return s.write(sb.String())
}

// comment writes an SSE comment (a keep-alive) and flushes it.
func (s *sseWriter) comment(text string) error {
	if err := s.write(": " + text + "\n\n"); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) write(text string) error {
	s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := s.w.Write([]byte(text))
	return err
}

func (s *sseWriter) flush() error {
	s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return s.rc.Flush()
}

// timedOut reports whether a write failed because the client did not take it in time.
func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
