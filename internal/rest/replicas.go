package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/stream"
)

// toOwner forwards a request about a sandbox's background processes to the replica that
// follows them, when that is not this one (docs/replicas.md); a request forwarded here already
// is served here. An owner that cannot be reached is asked for again (a killed replica's
// sandboxes find a new owner within a round), for a few seconds before a 503.
func (a *api) toOwner(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Forward == nil {
			next.ServeHTTP(w, r)
			return
		}
		p, ref := principal(r), chi.URLParam(r, "ref")
		owner, err := a.Processes.Elsewhere(r.Context(), p, ref)
		if err != nil {
			if forward.Forwarded(r) && errors.Is(err, stream.ErrShuttingDown) {
				// This replica is handing its sandboxes over: the one that sent the request
				// asks for the new owner.
				w.Header().Set(forward.MovedHeader, "shutting down")
			}
			a.writeError(w, r, err)
			return
		}
		if forward.Forwarded(r) {
			if owner != "" {
				// The lease moved while the request was on its way: the replica that sent it
				// asks again, rather than this one forwarding it on (no loops).
				w.Header().Set(forward.MovedHeader, "moved")
				a.writeError(w, r, &process.ElsewhereError{Sandbox: ref, URL: owner})
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if owner == "" {
			next.ServeHTTP(w, r)
			return
		}
		again := func(ctx context.Context) (string, error) { return a.Processes.Elsewhere(ctx, p, ref) }
		a.Forward.To(w, r, p, ref, owner, again, next, func(w http.ResponseWriter, r *http.Request, err error) {
			a.writeError(w, r, problem.New(problem.CodeUnavailable, "The hangar replica that follows this sandbox's processes did not answer; try again.", err))
		}, writeClose)
	})
}
