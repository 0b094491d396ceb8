package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hangar-dev/hangar/internal/problem"
)

// bodyDeadline bounds the time a request body may take to arrive: BodyTimeout, plus a second
// for every BodyMinRate bytes that have arrived (so a large upload at a fair rate is never cut,
// while a body trickled a byte at a time is). The bound holds only while a handler reads the
// body: the connection's read deadline is set before each read and cleared after it, so a
// response that streams for hours (SSE, MCP) is never cut, and a request without a body is not
// touched (net/http reads its connection in the background then, to see the client go). A body
// that misses its deadline reads as problem.ErrBodyTimeout (which also matches
// os.ErrDeadlineExceeded): 408, and net/http closes the connection.
func (a *api) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &timedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: a.Now(), now: a.Now,
			timeout: a.BodyTimeout, rate: a.BodyMinRate}
		next.ServeHTTP(w, r)
	})
}

// timedBody is a request body read under bodyDeadline's deadline. Reads are the handler's,
// one at a time.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	now     func() time.Time
	timeout time.Duration
	rate    int64
	read    int64 // bytes read so far
	expired bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	if b.expired {
		return 0, b.timeoutError()
	}
	deadline := b.start.Add(b.timeout + time.Duration(float64(b.read)/float64(b.rate)*float64(time.Second)))
	// A writer that cannot set deadlines (a test's recorder, HTTP/2 over some proxies) reads
	// unbounded, as before.
	bounded := b.rc.SetReadDeadline(deadline) == nil
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The deadline stays passed: net/http's own reads of what is left of the body (before
		// it answers) fail at once too, so the answer goes out and the connection is closed.
		b.expired = true
		return n, b.timeoutError()
	}
	if bounded {
		b.rc.SetReadDeadline(time.Time{}) // net/http's own: no deadline while a handler runs
	}
	return n, err
}

func (b *timedBody) timeoutError() error {
	return fmt.Errorf("%w (%w): %d bytes arrived in %s", problem.ErrBodyTimeout, os.ErrDeadlineExceeded, b.read, b.now().Sub(b.start).Round(time.Millisecond))
}
