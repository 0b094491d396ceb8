package rest

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/stream"
)

// forwardedHeader marks a request one replica forwarded to another: the receiver serves it
// itself (or fails), never forwarding it again, so a lease that moves mid-flight cannot make a
// loop.
const forwardedHeader = "X-Hangar-Forwarded-By"

// toOwner forwards a request about a sandbox's background processes to the replica that
// follows them, when that is not this one (docs/replicas.md): the request goes as it came
// (its bearer token included: the owner authenticates it again), and the answer, an SSE
// stream included, comes back as the owner writes it. The forwarding is held as a stream of
// this replica (counted in the total only: the owner counts it against the token), so a
// shutdown, the sandbox's end or the token's revocation here end it too.
func (a *api) toOwner(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forwardedHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		p := principal(r)
		ref := chi.URLParam(r, "ref")
		owner, err := a.Processes.Elsewhere(r.Context(), p, ref)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if owner == "" {
			next.ServeHTTP(w, r)
			return
		}
		target, err := url.Parse(owner)
		if err != nil {
			a.writeError(w, r, problem.New(problem.CodeUnavailable, "The replica that follows this sandbox's processes has an address hangar cannot use.", err))
			return
		}
		st, err := a.Streams.Open(r.Context(), stream.Options{Kind: stream.KindProcess, Principal: p, Sandbox: ref, Own: true, Unpaced: true})
		if err != nil {
			a.writeError(w, r, err)
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
				pr.SetURL(target)
				pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, r.URL.RawPath
				pr.Out.Header.Set(forwardedHeader, a.ReplicaURL)
			},
			FlushInterval: -1, // SSE: every write goes out at once
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if ctx.Err() != nil {
					return
				}
				a.writeError(w, r, problem.New(problem.CodeUnavailable, "The replica that follows this sandbox's processes did not answer; try again.", err))
			},
		}
		proxy.ServeHTTP(w, r.WithContext(ctx))
		st.End(stream.ReasonDone)
	})
}
