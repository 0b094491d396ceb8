package envd

import (
	"fmt"
	"net/http"
	"net/url"
)

// Passthrough returns what passes an HTTP request on to the daemon as it is (a reverse
// proxy's target): the daemon's base URL and a RoundTripper that sets the daemon's own
// X-Access-Token on every request (replacing any the request carries) and speaks the daemon's
// protocol: h2c to hangar's, HTTP/1.1 or TLS to E2B's, through its unix socket for a unix://
// URL. Its connections are the client's, released by Close.
func (c *Client) Passthrough() (*url.URL, http.RoundTripper, error) {
	u, err := url.Parse(c.baseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("envd client: the base URL %q is not valid: %w", c.baseURL, err)
	}
	return u, c.http.Transport, nil
}
