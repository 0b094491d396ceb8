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
