package oauthhttp_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/addrlimit"
	"github.com/hangar-dev/hangar/internal/oauthhttp"
)

// TestRateLimitedPerAddress: open registration and the consent form take so many requests a
// minute from one address, then answer 429 with Retry-After and a sentence; after that wait
// the address may go on. Everything here comes from 127.0.0.1.
func TestRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	var f *fixture
	f = newFixtureHTTP(t, 0, nil, func(c *oauthhttp.Config) {
		c.RegisterLimit = addrlimit.New(addrlimit.Config{PerMinute: 3, Clock: fixtureClock{now: func() time.Time { return f.clock() }}})
		c.ConsentLimit = addrlimit.New(addrlimit.Config{PerMinute: 2, Clock: fixtureClock{now: func() time.Time { return f.clock() }}})
	})
	register := func() *http.Response {
		resp, err := http.Post(f.url+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris": ["https://app.example/cb"]}`))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	consent := func() *http.Response {
		resp, err := http.PostForm(f.url+"/oauth/authorize", url.Values{"token": {"x"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct {
		name    string
		send    func() *http.Response
		allowed int
		wait    string
	}{
		{"register", register, 3, "20"},
		{"consent", consent, 2, "30"},
	} {
		for i := range c.allowed {
			resp := c.send()
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				t.Fatalf("%s: request %d of %d refused", c.name, i+1, c.allowed)
			}
		}
		resp := c.send()
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != c.wait ||
			!strings.Contains(string(body), "Too many requests from your address; try again in "+c.wait+" seconds.") {
			t.Errorf("%s: one more = %d, Retry-After %q, %s; want 429 after %s s, saying so", c.name, resp.StatusCode, resp.Header.Get("Retry-After"), body, c.wait)
		}
	}
	f.advance(time.Minute)
	if resp := register(); resp.StatusCode != http.StatusCreated {
		t.Errorf("register a minute later = %d, want 201", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
}
