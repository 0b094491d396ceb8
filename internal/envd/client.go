// Package envd is the control plane's client of a sandbox's daemon: hangar's own (`hangar
// envd`, package envd/daemon) or E2B's envd, which speak the same protocol (Connect RPC
// services process.Process and filesystem.Filesystem, generated in envd/spec, plus HTTP
// /health and /files).
//
// A Client is built from the daemon's URL and access token. Start runs a command and streams
// its events (start, stdout and stderr kept apart, end); Connect attaches to a running process;
// the rest are single calls. Errors match the sentinels of errors.go with errors.Is.
package envd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/envd/spec/filesystem/filesystemconnect"
	"github.com/hangar-dev/hangar/internal/envd/spec/process/processconnect"
)

// Config says how to reach a daemon.
type Config struct {
	// URL is http://host:port, https://host (E2B) or unix:///path/to/socket.
	URL string
	// AccessToken is sent as X-Access-Token. Empty: none (a daemon without a token).
	AccessToken string
	// User is the user commands run as and files are owned by, sent as
	// `Authorization: Basic base64(user:)`. Empty: the daemon's default user.
	User string
	// KeepaliveInterval asks the daemon for a keepalive event on a stream that was silent this
	// long (Keepalive-Ping-Interval, whole seconds). Zero: the daemon's default (90 s).
	KeepaliveInterval time.Duration
	// JSON makes the client use Connect's JSON codec instead of the binary one.
	JSON bool
	// Protocol is how to speak to an http:// daemon (ProtocolAuto when zero); unix:// is
	// always hangar's daemon (h2c) and https:// negotiates HTTP/2 or HTTP/1.1 in TLS.
	Protocol Protocol
	// HTTPClient, when set, is used as is (for https in tests, or proxies), and Protocol is
	// ignored. Nil: one chosen as Protocol says.
	HTTPClient *http.Client
}

// Protocol is how a client speaks to a daemon over plain http://.
type Protocol int

const (
	// ProtocolAuto asks the daemon's GET /health once, over HTTP/1.1, whether it is hangar's
	// (the answer carries the Hangar-Envd header), then speaks h2c to hangar's daemon and
	// HTTP/1.1 to any other: E2B's envd serves only HTTP/1.1 in cleartext. A probe that fails
	// is tried again by the next call.
	ProtocolAuto Protocol = iota
	// ProtocolH2C speaks HTTP/2 without TLS (prior knowledge), without a probe: for a daemon
	// known to be hangar's.
	ProtocolH2C
	// ProtocolHTTP1 speaks HTTP/1.1, without a probe.
	ProtocolHTTP1
)

// HangarHeader is set on the answers of hangar's daemon to GET /health (its value is 1), so
// that a client can tell it from E2B's envd and speak h2c to it.
const HangarHeader = "Hangar-Envd"

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	cfg     Config
	baseURL string // what requests are sent to: the URL, or http://envd for a unix socket
	http    *http.Client
	proc    processconnect.ProcessClient
	fs      filesystemconnect.FilesystemClient
}

// New returns a client of the daemon at cfg.URL. It does not connect; see Health.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("envd client: the URL %q is not valid: %w", cfg.URL, err)
	}
	if cfg.KeepaliveInterval < 0 || (cfg.KeepaliveInterval > 0 && cfg.KeepaliveInterval < time.Second) {
		return nil, fmt.Errorf("envd client: the keepalive interval must be whole seconds, not %s", cfg.KeepaliveInterval)
	}
	c := &Client{cfg: cfg}
	var transport http.RoundTripper
	switch u.Scheme {
	case "http":
		c.baseURL = strings.TrimRight(cfg.URL, "/")
		switch cfg.Protocol {
		case ProtocolH2C:
			transport = h2cTransport(nil)
		case ProtocolHTTP1:
			transport = http1Transport()
		case ProtocolAuto:
			transport = &negotiating{healthURL: c.baseURL + "/health", h1: http1Transport(), h2c: h2cTransport(nil)}
		default:
			return nil, fmt.Errorf("envd client: unknown protocol %d", cfg.Protocol)
		}
	case "https":
		c.baseURL = strings.TrimRight(cfg.URL, "/")
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ForceAttemptHTTP2 = true
		transport = t
	case "unix":
		path := u.Path
		if path == "" {
			path = u.Opaque // unix:/path and unix:path
		}
		if path == "" {
			return nil, fmt.Errorf("envd client: the URL %q has no socket path (unix:///path/to/socket)", cfg.URL)
		}
		c.baseURL = "http://envd"
		transport = h2cTransport(func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		})
	default:
		return nil, fmt.Errorf("envd client: the URL %q must start with http://, https:// or unix://", cfg.URL)
	}
	c.http = cfg.HTTPClient
	if c.http == nil {
		c.http = &http.Client{Transport: transport}
	}
	c.http = &http.Client{
		Transport:     &headerTransport{next: transportOf(c.http), cfg: cfg},
		CheckRedirect: c.http.CheckRedirect,
		Jar:           c.http.Jar,
	}
	// No compression asked of the daemon: connect-go asks for gzip by default
	// (Connect-Accept-Encoding), and E2B's envd then gzips every output message, a line at a
	// time: larger messages (53 bytes instead of 32 for one line) and ~200k instructions a line
	// in the daemon (issue 31). Output comes over loopback or a sandbox's own network.
	opts := []connect.ClientOption{connect.WithAcceptCompression("gzip", nil, nil), connect.WithCodec(outputCodec{})}
	if cfg.JSON {
		opts = append(opts, connect.WithProtoJSON())
	}
	c.proc = processconnect.NewProcessClient(c.http, c.baseURL, opts...)
	c.fs = filesystemconnect.NewFilesystemClient(c.http, c.baseURL, opts...)
	return c, nil
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport == nil {
		return http.DefaultTransport
	}
	return hc.Transport
}

func http1Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	var p http.Protocols
	p.SetHTTP1(true)
	t.Protocols = &p
	return t
}

// negotiating sends each request with h2c to hangar's daemon and with HTTP/1.1 to any other,
// having asked the daemon's /health which it is (ProtocolAuto).
type negotiating struct {
	healthURL string
	h1        *http.Transport
	h2c       http.RoundTripper // h2cTransport's, which closes its idle connections too

	mu     sync.Mutex // held while probing, so that one probe answers every waiting call
	chosen http.RoundTripper
}

func (n *negotiating) RoundTrip(r *http.Request) (*http.Response, error) {
	t, err := n.transport(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return t.RoundTrip(r)
}

// transport is the transport chosen for the daemon, asking it first when none is yet.
func (n *negotiating) transport(ctx context.Context) (http.RoundTripper, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.chosen != nil {
		return n.chosen, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.healthURL, nil)
	if err != nil {
		return nil, fmt.Errorf("ask the daemon its protocol: %w", err)
	}
	res, err := n.h1.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("ask the daemon its protocol: %w", err)
	}
	res.Body.Close()
	n.chosen = n.h1
	if res.Header.Get(HangarHeader) == "1" {
		n.chosen = n.h2c
	}
	return n.chosen, nil
}

// CloseIdleConnections closes both transports' idle connections.
func (n *negotiating) CloseIdleConnections() {
	n.h1.CloseIdleConnections()
	n.h2c.(interface{ CloseIdleConnections() }).CloseIdleConnections()
}

// headerTransport adds the daemon's headers to every request.
type headerTransport struct {
	next http.RoundTripper
	cfg  Config
}

// CloseIdleConnections lets http.Client.CloseIdleConnections (Client.Close) reach the
// transport underneath.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.cfg.AccessToken != "" {
		r.Header.Set("X-Access-Token", t.cfg.AccessToken)
	}
	if t.cfg.User != "" {
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(t.cfg.User+":")))
	}
	if t.cfg.KeepaliveInterval > 0 {
		r.Header.Set("Keepalive-Ping-Interval", strconv.Itoa(int(t.cfg.KeepaliveInterval/time.Second)))
	}
	return t.next.RoundTrip(r)
}

// Health checks that the daemon answers GET /health (204, no authentication needed).
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/health", nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("health: %w", ctx.Err())
		}
		return &Error{Op: "health", Code: connect.CodeUnavailable, Message: err.Error(), kind: ErrUnavailable, cause: err}
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return httpError("health", res.StatusCode, "")
	}
	return nil
}

var errUnexpected = errors.New("unexpected answer")
