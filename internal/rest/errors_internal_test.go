package rest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/stream"
)

// TestElsewhereSaysNotOwner: a sandbox handed to another replica between the forwarding
// replica's question and the work here (a process start that found it released) is answered
// 503 marked X-Hangar-Not-Owner when forwarded, so that replica asks again rather than pass the
// 503 on; a client's own request gets the 503 unmarked. Neither names where the other replica
// is reached: that is an address inside the deployment.
func TestElsewhereSaysNotOwner(t *testing.T) {
	t.Parallel()
	a := &api{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, forwarded := range []bool{false, true} {
		req := httptest.NewRequest("POST", "/api/sandboxes/box/processes", nil)
		if forwarded {
			req.Header.Set(forward.Header, "http://127.0.0.1:1")
		}
		rec := httptest.NewRecorder()
		a.writeError(rec, req, &process.ElsewhereError{Sandbox: "box", URL: "http://b:8080"})
		moved := rec.Header().Get(forward.MovedHeader)
		if rec.Code != http.StatusServiceUnavailable || (moved != "") != forwarded || strings.Contains(rec.Body.String()+moved, "b:8080") {
			t.Errorf("forwarded %v: %d, %s %q; want 503, the header only when forwarded, and the other replica's address in neither", forwarded, rec.Code, forward.MovedHeader, moved)
		}
	}
}

// TestUnstartedSaysNotOwner: a forwarded process start that this replica's shutdown refused
// before it began is answered 503 marked X-Hangar-Not-Owner, so the replica that forwarded it
// sends it to the sandbox's next owner; a forwarded request of another method refused by the
// shutdown (which may have done part of its work) and a client's own request are not marked.
func TestUnstartedSaysNotOwner(t *testing.T) {
	t.Parallel()
	a := &api{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []struct {
		forwarded bool
		err       error
		want      bool
	}{
		{true, &process.UnstartedError{Err: stream.ErrShuttingDown}, true},
		{false, &process.UnstartedError{Err: stream.ErrShuttingDown}, false},
		{true, stream.ErrShuttingDown, false},
	} {
		req := httptest.NewRequest("POST", "/api/sandboxes/box/processes", nil)
		if c.forwarded {
			req.Header.Set(forward.Header, "http://127.0.0.1:1")
		}
		rec := httptest.NewRecorder()
		a.writeError(rec, req, c.err)
		if moved := rec.Header().Get(forward.MovedHeader); rec.Code != http.StatusServiceUnavailable || (moved != "") != c.want {
			t.Errorf("forwarded %v, %T: %d, %s %q; want 503, marked %v", c.forwarded, c.err, rec.Code, forward.MovedHeader, moved, c.want)
		}
	}
}
