//lint:file-ignore SA1019 x/net's HTTP/2 transport on its own, deprecated for net/http's Transport around it, which is what races (h2cTransport).

package envd

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// h2cTransport speaks HTTP/2 without TLS (prior knowledge), dialling with dial when set. It is
// x/net's HTTP/2 transport itself, not net/http's Transport around the same: when a request
// must go again on a new connection (the daemon sent GOAWAY as it shut down), net/http's
// Transport checks whether the body was read while the first attempt's writer may still be
// reading it, unsynchronized (a data race the race detector found here once, golang/go#41234's
// kind); x/net's takes a fresh body from GetBody, or does not retry.
func h2cTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) http.RoundTripper {
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // http.DefaultTransport's
		dial = d.DialContext
	}
	return &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return dial(ctx, network, addr)
		},
	}
}
