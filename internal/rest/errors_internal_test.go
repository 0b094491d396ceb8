package rest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hangar-dev/hangar/internal/forward"
	"github.com/hangar-dev/hangar/internal/process"
)

// TestElsewhereSaysNotOwner: a sandbox handed to another replica between the forwarding
// replica's question and the work here (a process start that found it released) is answered
// 503 marked X-Hangar-Not-Owner when forwarded, so that replica asks again rather than pass the
// 503 on; a client's own request gets the 503 unmarked.
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
		if rec.Code != http.StatusServiceUnavailable || (moved == "http://b:8080") != forwarded || (moved != "") != forwarded {
			t.Errorf("forwarded %v: %d, %s %q; want 503, and the header naming the owner only when forwarded", forwarded, rec.Code, forward.MovedHeader, moved)
		}
	}
}
