package rest

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/stream"
)

// watchStream is GET /api/sandboxes/{ref}/watch?path=<dir>[&recursive=true]: the changes under
// the directory as SSE, each a plain message with id: its seq and data: {seq, ts, name, type};
// Last-Event-ID (or since) resumes within what is kept, and a gap event says what was missed.
func (a *api) watchStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	recursive := false
	if v := q.Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.writeError(w, r, newError(CodeBadRequest, "recursive must be true or false.", err))
			return
		}
		recursive = b
	}
	a.eventStream(w, r, func(since int64) (*stream.Stream, error) {
		return a.Watches.Stream(r.Context(), principal(r), chi.URLParam(r, "ref"), q.Get("path"), recursive, since)
	})
}
