package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/problem"
)

// bodyDeadline bounds the time a request body may take to arrive: BodyTimeout, plus a second
// for every BodyMinRate bytes that have arrived (so a large upload at a fair rate is never cut,
// while a body trickled a byte at a time is).
//
// The connection's read deadline is set before the handler runs, pushed later as bytes arrive,
// and cleared only when the body has been read to its end. So the bound holds also while
// net/http discards what a handler left unread before it sends the answer (a 401, 404, 405 or
// 429 written without touching the body): a slow body misses the deadline there too, and the
// connection is closed after the answer instead of being held for as long as the client likes.
// A response that streams for hours (SSE, MCP) is never cut: net/http reads its connection in
// the background (to see the client go) only once the body has hit its end, and from then on
// the deadline is never set again. A request without a body is not touched (that background read starts
// before the handler). The contract this asks of handlers: one that streams reads its body to
// the end first (decodeJSON does; so does MCP's). A body that misses its deadline reads as
// problem.ErrBodyTimeout (which also matches os.ErrDeadlineExceeded): 408, and net/http closes
// the connection.
func (a *api) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// E2B's daemon calls pass their bodies to the sandbox as they come (a keystroke at a
		// time for StreamInput, a file as slow as its sender); each is a registry stream of a
		// checked token, bounded by its limits instead.
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || (a.E2BSandbox != nil && strings.HasPrefix(r.URL.Path, e2bSandboxPrefix+"/")) {
			next.ServeHTTP(w, r)
			return
		}
		// The wall clock, not Config.Clock: the connection's read deadline is the kernel's to
		// keep.
		b := &timedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(),
			timeout: a.BodyTimeout, rate: a.BodyMinRate}
		// A writer that cannot set deadlines (a test's recorder, HTTP/2 over some proxies)
		// reads unbounded, as before.
		b.bounded = b.push() == nil
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// timedBody is a request body read under bodyDeadline's deadline. Reads are the handler's,
// one at a time.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time // on the wall clock, as the deadline it sets
	timeout time.Duration
	rate    int64
	bounded bool  // the connection takes read deadlines
	read    int64 // bytes read so far
	expired bool
	done    bool // the body hit its end and the deadline is cleared
}

// push sets the connection's read deadline for what has arrived so far.
func (b *timedBody) push() error {
	return b.rc.SetReadDeadline(b.start.Add(b.timeout + time.Duration(float64(b.read)/float64(b.rate)*float64(time.Second))))
}

func (b *timedBody) Read(p []byte) (int, error) {
	if b.expired {
		return 0, b.timeoutError()
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	switch {
	case !b.bounded || b.done:
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays passed: net/http's own reads of what is left of the body (before
		// it answers) fail at once too, so the answer goes out and the connection is closed.
		b.expired = true
		return n, b.timeoutError()
	case err == io.EOF:
		// The whole body is in (its last bytes may come with the EOF: this case goes before
		// the push). net/http's background read of the connection, started as the body hit
		// its end, cleared the deadline and must run without one for as long as the response
		// streams: the deadline is never set again (clearing it here too costs nothing).
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	case n > 0:
		b.push()
	}
	return n, err
}

func (b *timedBody) timeoutError() error {
	return fmt.Errorf("%w (%w): %d bytes arrived in %s", problem.ErrBodyTimeout, os.ErrDeadlineExceeded, b.read, time.Since(b.start).Round(time.Millisecond))
}
