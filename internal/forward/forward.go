// Package forward passes an HTTP request on to another hangar replica as it came, and that
// replica's answer back as it writes it (an SSE stream flushed event by event): how a replica
// serves a request about a sandbox whose processes another replica follows
// (docs/replicas.md), or a request of an MCP session that another replica holds. Both
// transports use it, REST for its process routes and MCP for its process tool and its
// sessions.
package forward

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Header marks a request one replica forwarded to another, naming the first: the receiver
// serves it itself (or fails), never forwarding it again, so a lease that moves mid-flight
// cannot make a loop.
const Header = "X-Hangar-Forwarded-By"

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
}

// To forwards r, made by p about sandbox ("" for a request about none, an MCP session's), to
// the replica at target (its bearer token with it: the owner authenticates it again) and copies
// the answer to w. When target cannot be reached,
// or the forwarding cannot be held, fail answers instead.
func (f *Forwarder) To(w http.ResponseWriter, r *http.Request, p auth.Principal, sandbox, target string, fail func(http.ResponseWriter, *http.Request, error)) {
	u, err := url.Parse(target)
	if err != nil {
		fail(w, r, err)
		return
	}
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
			cancel()
		case <-ctx.Done():
		}
	}()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, r.URL.RawPath
			pr.Out.Header.Set(Header, f.Self)
		},
		FlushInterval: -1, // SSE: every write goes out at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if ctx.Err() == nil {
				fail(w, r, err)
			}
		},
	}
	proxy.ServeHTTP(w, r.WithContext(ctx))
	st.End(stream.ReasonDone)
}
