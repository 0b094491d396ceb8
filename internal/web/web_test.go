package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/web"
)

// TestDeepLinksServeThePage: an agent's address is the page itself (a reload of
// /fleet/sessions/<name> must not be a 404), and anything else below /fleet/ that is not one of
// its files still is.
func TestDeepLinksServeThePage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(web.Handler("/fleet/"))
	defer srv.Close()
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/fleet/", http.StatusOK},
		{"/fleet/sessions/fix-tests", http.StatusOK},
		{"/fleet/jobs/job_b7kwq3ttm2xv4dzn", http.StatusOK},
		{"/fleet/sessions/", http.StatusNotFound},
		{"/fleet/sessions/a/b", http.StatusNotFound},
		{"/fleet/sandboxes/box", http.StatusNotFound},
	} {
		r, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, r.StatusCode, tc.want)
			continue
		}
		if tc.want != http.StatusOK {
			continue
		}
		if !strings.Contains(string(body), `<script src="/fleet/fleet.js"`) {
			t.Errorf("GET %s is not the page (its script from /fleet/, wherever it is opened):\n%s", tc.path, body)
		}
		if r.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s has no Content-Security-Policy", tc.path)
		}
	}
}
