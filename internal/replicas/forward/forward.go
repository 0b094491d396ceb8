// Package forward passes an HTTP request on to another hangar replica as it came, and that
// replica's answer back as it writes it (an SSE stream flushed event by event): how a replica
// serves a request about a sandbox whose processes another replica follows
// (docs/replicas.md), or a request of an MCP session that another replica holds. Both
// transports use it, REST for its process routes and MCP for its process tool and its
// sessions. It is the replicas' HTTP side, a package of its own so that the transports import
// it without the leases and their database (package replicas).
package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Header marks a request one replica forwarded to another, naming the first: the receiver
// serves it itself (or fails), never forwarding it again, so a lease that moves mid-flight
// cannot make a loop.
const Header = "X-Hangar-Forwarded-By"

// MovedHeader, on a 503 answer to a forwarded request, says the replica that answered does not
// own the sandbox (any more: its lease moved while the request was on its way): the replica
// that forwarded it asks for the owner again and forwards it there, as when the owner cannot
// be reached. Nothing of the request was done.
const MovedHeader = "X-Hangar-Not-Owner"

// errMoved is the answer of a replica that no longer owns the sandbox.
var errMoved = errors.New("the replica no longer owns the sandbox (its lease moved)")

// Forwarded reports whether r came from another replica.
func Forwarded(r *http.Request) bool { return r.Header.Get(Header) != "" }

// Forwarder forwards requests to other replicas.
type Forwarder struct {
	// Self is this replica's advertised URL, sent in Header. Required.
	Self string
	// Streams holds each forwarding as a stream of this replica (kind process, counted in the
	// total only: the owner counts it against the token), so a shutdown, the sandbox's end or
	// the token's revocation here end it like any other. Required.
	Streams *stream.Registry
	// Unreachable is told that the replica at url could not be reached (no answer byte came):
	// the replicas look for dead ones at once, so that asking the owner again finds the
	// lease free. Nil: nothing is told.
	Unreachable func(ctx context.Context, url string)
	// Wait bounds how long a request waits, when its owner cannot be reached, for the sandbox
	// to get a live owner (a killed replica is seen dead within a round; a leaving one hands
	// its leases over as it stops) before it fails. Default 3s.
	Wait time.Duration
	// Clock paces the retries. Default the real clock.
	Clock quartz.Clock
}

// retryEvery is how often a request whose owner cannot be reached asks again who owns the
// sandbox, within Wait.
const retryEvery = 100 * time.Millisecond

// maxMoves bounds how long answers that the lease moved keep the request waiting: each starts
// the wait again, up to maxMoves waits in all (a leaving replica answers so until its handover
// ends, which waits for the starts under way there: seconds under load), and a lease that
// keeps moving is answered 503 in the end.
const maxMoves = 5

// retryBodyBytes is the most of a request body kept to send it again to another owner: the
// process routes' bodies are small (a command, a line of input), and a larger one is sent
// once.
const retryBodyBytes = 1 << 20

// Owner says who serves the request's sandbox now: "" this replica, else the owner's URL.
type Owner func(ctx context.Context) (string, error)

// To forwards r, made by p about sandbox ("" for a request about none, an MCP session's), to
// the replica at target (its bearer token with it: the owner authenticates it again) and copies
// the answer to w. When target cannot be reached (no byte of an answer came), or answers that
// it does not own the sandbox (MovedHeader), it asks owner again and forwards to the new owner,
// or serves r with local when the sandbox is this replica's now, for up to Wait (Wait again
// after each answer that the sandbox is not the target's, up to 1+maxMoves times Wait in all);
// then, or when the forwarding cannot be held, fail answers instead.
//
// The forwarding is a stream of this replica's, and ends with it (held). A GET stream cut here
// ends as this replica's own streams do, not as a broken connection: after the owner's last
// whole event, closing (nil: nothing) writes its last event for the reason the stream ended, and
// the response ends cleanly, so the client resumes through another replica (with Last-Event-ID).
// Any other answer cut here mid-way (a request of another method, or an answer that is not an
// SSE stream) is aborted: a part of an answer must not look whole.
func (f *Forwarder) To(w http.ResponseWriter, r *http.Request, p auth.Principal, sandbox, target string, owner Owner, local http.Handler,
	fail func(http.ResponseWriter, *http.Request, error), closing func(http.ResponseWriter, stream.Reason)) {
	st, err := f.Streams.Open(r.Context(), stream.Options{Kind: stream.KindProcess, Principal: p, Sandbox: sandbox, Own: true, Unpaced: true})
	if err != nil {
		fail(w, r, err)
		return
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-st.Done():
			if held(r, st.Reason()) {
				return
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	body, again := keepBody(r)
	clock := f.Clock
	if clock == nil {
		clock = quartz.NewReal()
	}
	wait := f.Wait
	if wait <= 0 {
		wait = 3 * time.Second
	}
	deadline := clock.Now().Add(wait)
	last := deadline.Add(maxMoves * wait)
	for {
		err := f.once(ctx, w, r, target, st, closing)
		if err == nil || ctx.Err() != nil {
			st.End(stream.ReasonDone)
			return
		}
		if errors.Is(err, errMoved) {
			// A live replica answered that the sandbox is not its own (any more), or not yet
			// handed over as it leaves: the wait for the new owner starts again.
			if deadline = clock.Now().Add(wait); deadline.After(last) {
				deadline = last
			}
		}
		if !again || owner == nil || !unsent(r, err) || !clock.Now().Before(deadline) {
			fail(w, r, err)
			return
		}
		if f.Unreachable != nil {
			f.Unreachable(ctx, target)
		}
		next, oerr := owner(ctx)
		if oerr != nil {
			fail(w, r, oerr)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if next == "" {
			st.End(stream.ReasonDone)
			local.ServeHTTP(w, r)
			return
		}
		if next == target {
			// Not seen dead yet (or still handing its leases over): ask again shortly.
			t := clock.NewTimer(retryEvery, "forward", "retry")
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		target = next
	}
}

// held reports whether a forwarding of r goes on although its stream here ended for reason: a
// request that is not a GET (a request and its answer: an MCP session's POST, a process's start
// or input) runs to its answer when this replica shuts down, within the server's shutdown grace
// (the server drains in-flight requests after the streams end), as a request served here does;
// a GET stream ends with this replica's other streams, and its client opens it again through
// another replica. The sandbox's end, the token's revocation and the client's leaving end both.
func held(r *http.Request, reason stream.Reason) bool {
	return reason == stream.ReasonShutdown && !isStream(r)
}

// isStream reports whether r asks for a stream (or nothing but headers) rather than an answer.
func isStream(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

// keepBody reads r's body (up to retryBodyBytes) so it can be sent again, and reports whether
// it can: a larger one is sent once.
func keepBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		r.Body = http.NoBody
		return nil, true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, retryBodyBytes+1))
	if err != nil || len(b) > retryBodyBytes {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}, r.Body))
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	// The transport sends it again by itself on a kept-alive connection found closed before
	// anything was written (the owner was killed since the last request).
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, true
}

// unsent reports whether r, which failed with err before any answer, may be sent again to
// another owner: a GET or HEAD whatever the error, any other only when it never left (the
// connection could not be made), so a process is never started twice.
func unsent(r *http.Request, err error) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	var op *net.OpError
	return errors.Is(err, errMoved) || errors.As(err, &op) && op.Op == "dial"
}

// errReader fails with err (passes on when err is nil).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// once forwards r to target, copying the answer to w; an error says no answer came (nothing
// was written to w). An answer whose copy broke ends as To says.
func (f *Forwarder) once(ctx context.Context, w http.ResponseWriter, r *http.Request, target string, st *stream.Stream,
	closing func(http.ResponseWriter, stream.Reason)) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	var unreached error
	var ans *answer
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, r.URL.RawPath
			pr.Out.Header.Set(Header, f.Self)
		},
		FlushInterval: -1, // SSE: every write goes out at once
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(MovedHeader) != "" {
				return errMoved
			}
			ans = &answer{ReadCloser: resp.Body, sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
			resp.Body = ans
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			unreached = err
		},
		// A broken copy is dealt with below; the proxy would only log it.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	// Without net/http's ServerContextKey the proxy returns when the copy of the answer breaks,
	// rather than panicking with http.ErrAbortHandler, so that a stream cut here can end well.
	proxy.ServeHTTP(w, r.WithContext(unserved{ctx}))
	if unreached != nil || ans == nil || ans.err == nil {
		return unreached
	}
	cutHere := ctx.Err() != nil && r.Context().Err() == nil
	switch {
	case cutHere && isStream(r) && ans.sse:
		if closing != nil && ans.betweenEvents() {
			closing(w, st.Reason())
		} // else the stream just ends: its client opens it again
	case r.Context().Value(http.ServerContextKey) != nil:
		panic(http.ErrAbortHandler) // as the proxy does: the client sees the answer broken
	}
	return nil
}

// unserved is a request's context without net/http's ServerContextKey.
type unserved struct{ context.Context }

func (c unserved) Value(key any) any {
	if key == http.ServerContextKey {
		return nil
	}
	return c.Context.Value(key)
}

// answer is the body of the owner's answer as the proxy copies it (on To's goroutine): it keeps
// the error that broke the copy, and the answer's last two bytes, to tell whether an SSE stream
// broke between two events.
type answer struct {
	io.ReadCloser
	sse  bool  // the answer is an SSE stream
	err  error // the read error that broke the copy; nil at io.EOF
	read int64
	last [2]byte
}

func (a *answer) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	if n > 0 {
		a.last = [2]byte{a.last[1], p[n-1]}
		if n > 1 {
			a.last[0] = p[n-2]
		}
		a.read += int64(n)
	}
	if err != nil && err != io.EOF {
		a.err = err
	}
	return n, err
}

// betweenEvents reports whether what was copied ends with a whole event (or nothing yet): a
// last event written after it is one event of its own, not the end of a cut one.
func (a *answer) betweenEvents() bool { return a.read == 0 || a.last == [2]byte{'\n', '\n'} }
