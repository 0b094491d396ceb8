package rest_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAgentAddressesArePages: an agent's address on the Fleet page (/fleet/sessions/<name>,
// /fleet/jobs/<id>) is the page itself, served without a token, while the data it shows still
// needs one.
func TestAgentAddressesArePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/fleet/sessions/fix-tests", "/fleet/jobs/job_b7kwq3ttm2xv4dzn"} {
		r, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s without a token = %d %s, want the Fleet page", path, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}
	wantError(t, e.do(t, "GET", "/api/fleet", "", ""), http.StatusUnauthorized, "unauthorized")
}
