package e2bapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Daemons reaches sandboxes' daemons: *sandbox.Manager.
type Daemons interface {
	// DaemonPassthrough returns the daemon's base URL and a RoundTripper that sends requests to
	// it with the daemon's own access token.
	DaemonPassthrough(sb store.Sandbox) (*url.URL, http.RoundTripper, error)
	// KillDaemonProcess kills the process pid in the sandbox's daemon.
	KillDaemonProcess(ctx context.Context, sb store.Sandbox, pid uint32) error
}

// DaemonConfig configures the daemon pass-through.
type DaemonConfig struct {
	// Grants checks the envdAccessToken a call carries. Required.
	Grants Grants
	// Daemons reaches the sandboxes' daemons. Required.
	Daemons Daemons
	// Streams admits the streaming calls. Required.
	Streams *stream.Registry
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// The headers E2B's SDKs send with every daemon call through E2B_SANDBOX_URL.
const (
	sandboxHeader = "E2b-Sandbox-Id"
	portHeader    = "E2b-Sandbox-Port"
	tokenHeader   = "X-Access-Token"
)

// streaming are the envd calls whose answer (or request) is a stream: each is a registry
// stream for as long as it is open. WatchDir's, like hangar's watches, has a lifetime.
var streaming = map[string]struct{ lifetime bool }{
	"/process.Process/Start":          {},
	"/process.Process/Connect":        {},
	"/process.Process/StreamInput":    {},
	"/filesystem.Filesystem/WatchDir": {lifetime: true},
	// A file's upload or download is as long as the file: it counts against the limits and
	// ends on revocation like a stream.
	"/files": {},
}

// passable says whether a call is of the daemon's API that E2B's SDKs use: its two Connect
// services, /files and /health. Nothing else of the daemon is reached from outside: not
// POST /init, which sets the daemon's access token, user and environment (hangar's to set),
// nor anything a future daemon adds.
func passable(method, p string) bool {
	if path.Clean(p) != p {
		return false // dot segments, doubled slashes: never a call of the API
	}
	switch {
	case isConnectCall(p):
		return method == http.MethodPost
	case p == "/files":
		return method == http.MethodGet || method == http.MethodPost
	case p == "/health":
		return method == http.MethodGet
	}
	return false
}

// NewDaemon returns the handler of E2B_SANDBOX_URL (mounted at /e2b/sandbox, the prefix
// stripped): every envd call an E2B SDK makes — Connect RPC in JSON or binary, /files up and
// down, /health — passed as it is to the daemon of the sandbox its E2b-Sandbox-Id header
// names, once its X-Access-Token is found to be a grant of that sandbox (Grants.Check). The
// daemon gets its own access token, never the client's. Streaming calls are registry streams
// of kind stream.KindE2B, of the grant's principal: they count against its token's limits and
// end when the token is revoked, the sandbox destroyed or paused, or hangar shuts down.
func NewDaemon(cfg DaemonConfig) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &daemonProxy{cfg: cfg}
}

// daemonProxy is NewDaemon's handler. It holds no state of its own.
type daemonProxy struct{ cfg DaemonConfig }

func (d *daemonProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sandboxHeader)
	if id == "" {
		d.refuse(w, r, http.StatusBadRequest, "invalid_argument",
			"The request names no sandbox: E2B's SDK sends its id in the E2b-Sandbox-Id header (E2B_SANDBOX_URL points here).", nil)
		return
	}
	if !passable(r.Method, r.URL.Path) {
		d.refuse(w, r, http.StatusNotFound, "not_found", fmt.Sprintf("%s %.100s is not a call hangar passes to a sandbox's daemon: only its process and filesystem services (POST), /files (GET, POST) and /health (GET).", r.Method, r.URL.Path), nil)
		return
	}
	token := r.Header.Get(tokenHeader)
	if token == "" {
		d.refuse(w, r, http.StatusUnauthorized, "unauthenticated",
			"The request carries no access token: send the sandbox's envdAccessToken as X-Access-Token.", nil)
		return
	}
	g, err := d.cfg.Grants.Check(r.Context(), id, token)
	if err != nil {
		d.refuseGrant(w, r, id, err)
		return
	}
	base, rt, err := d.cfg.Daemons.DaemonPassthrough(g.Sandbox)
	if err != nil {
		d.refuse(w, r, http.StatusBadGateway, "unavailable", fmt.Sprintf("The sandbox %.100q has no daemon that can be reached.", id), err)
		return
	}
	kind, isStream := streaming[r.URL.Path]
	if !isStream {
		d.proxy(base, rt, nil).ServeHTTP(w, r)
		return
	}
	s, err := d.cfg.Streams.Open(r.Context(), stream.Options{Kind: stream.KindE2B, Principal: g.Principal, Sandbox: g.Sandbox.Name,
		Lifetime: kind.lifetime, Unpaced: true})
	if err != nil {
		d.refuseStream(w, r, err)
		return
	}
	// The sandbox may have been paused or destroyed, or the token revoked, between the check
	// and the open, after the registry ended that sandbox's or token's streams: check again.
	if _, err := d.cfg.Grants.Check(r.Context(), id, token); err != nil {
		s.Close()
		d.refuseGrant(w, r, id, err)
		return
	}
	c := &call{s: s, start: r.URL.Path == "/process.Process/Start"}
	// Deferred: the proxy ends a response it cannot finish (cut mid-message) by panicking
	// with http.ErrAbortHandler, which net/http takes as "drop the connection".
	defer d.finish(r, g, c)
	d.stream(w, r, base, rt, c)
}

// refuseGrant answers a call whose access token Grants.Check refused with err, as E2B answers.
func (d *daemonProxy) refuseGrant(w http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case errors.Is(err, ErrNoSandbox):
		// E2B's edge answers 502 for a sandbox it does not know (or no longer runs): the SDK
		// raises its SandboxNotFoundError (a stream's start) or TimeoutError.
		d.refuse(w, r, http.StatusBadGateway, "unavailable", fmt.Sprintf("The sandbox %.100q was not found: it does not exist, is not running, or is not yours.", id), nil)
	case errors.Is(err, ErrAccessDenied):
		d.refuse(w, r, http.StatusUnauthorized, "unauthenticated", "The access token is not valid for this sandbox (wrong, or its hangar token was revoked or expired).", err)
	default:
		d.refuse(w, r, http.StatusServiceUnavailable, "unavailable", "hangar could not check the access token; try again in a moment.", err)
	}
}

// finish closes a streaming call's registry stream, saying the client went if it did, and
// kills the process a revoked token's Start began, as a streamed command of a revoked token is
// killed (spec/streaming.md). A client going away, a shutdown or a destroy leaves it be, as
// E2B's envd does when a Start's stream ends.
func (d *daemonProxy) finish(r *http.Request, g Grant, c *call) {
	defer c.s.Close()
	if r.Context().Err() != nil {
		c.s.End(stream.ReasonClient)
	}
	pid := c.pid.Load()
	if c.s.Reason() != stream.ReasonRevoked || pid == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), killTimeout)
	defer cancel()
	if err := d.cfg.Daemons.KillDaemonProcess(ctx, g.Sandbox, pid); err != nil {
		d.cfg.Logger.Warn("kill the process of a revoked token's e2b stream", "sandbox", g.Sandbox.Name, "pid", pid, "err", err)
	}
}

// killTimeout bounds the kill of a revoked token's process.
const killTimeout = 10 * time.Second

// call is one streaming call passed through.
type call struct {
	s     *stream.Stream
	start bool          // a Start: pid is its process's, once its start event passed
	pid   atomic.Uint32 // set by the proxy's copy, read once it is done
}

// stream passes a streaming call c, ending it upstream when the registry ends c.s.
func (d *daemonProxy) stream(w http.ResponseWriter, r *http.Request, base *url.URL, rt http.RoundTripper, c *call) {
	ctx, cancel := context.WithCancel(r.Context())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-c.s.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-ended }()
	d.proxy(base, rt, c).ServeHTTP(w, r.WithContext(ctx))
}

// proxy passes one request to the daemon at base through rt. With c (a streaming call), the
// bytes of the answer count on its stream, and an answer the registry ended closes with
// Connect's end-of-stream error naming why.
func (d *daemonProxy) proxy(base *url.URL, rt http.RoundTripper, c *call) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Host = base.Host
			// The client's token was hangar's grant; the daemon's own is rt's to set. hangar's
			// own credentials (a cookie, an API key, a bearer token) never reach the sandbox;
			// Basic authorization, E2B's way of naming the user a call runs as, does.
			for _, h := range []string{tokenHeader, sandboxHeader, portHeader, "Cookie", "X-API-Key"} {
				pr.Out.Header.Del(h)
			}
			if a := pr.Out.Header.Get("Authorization"); a != "" && !strings.HasPrefix(a, "Basic ") {
				pr.Out.Header.Del("Authorization")
			}
		},
		Transport:     rt,
		FlushInterval: -1, // every write reaches the client at once: a stream is never held back
		ModifyResponse: func(res *http.Response) error {
			// What the sandbox answers is served from hangar's origin: it sets no cookie there,
			// and is never taken for a page.
			res.Header.Del("Set-Cookie")
			res.Header.Set("X-Content-Type-Options", "nosniff")
			if c == nil {
				return nil
			}
			var first func([]byte, bool)
			if c.start {
				first = func(data []byte, json bool) { c.pid.Store(startPID(data, json)) }
			}
			res.Body = newPassedBody(res.Body, c.s, res.Header.Get("Content-Type"), first)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if c != nil && c.s.Reason() != "" {
				// Ended before the daemon answered: a Connect stream's error is its
				// end-of-stream message, under 200, so the SDK reads why (a revoked token is
				// its AuthenticationError) rather than "the sandbox is not running".
				code, msg := endedError(c.s.Reason())
				if ct := r.Header.Get("Content-Type"); isConnectStream(ct) {
					w.Header().Set("Content-Type", ct)
					w.WriteHeader(http.StatusOK)
					w.Write(endOfStreamError(code, msg))
					return
				}
				d.refuse(w, r, http.StatusServiceUnavailable, code, msg, err)
				return
			}
			if r.Context().Err() != nil {
				return // the client went away: nobody reads an answer
			}
			d.refuse(w, r, http.StatusBadGateway, "unavailable", "The sandbox's daemon did not answer; the sandbox may have stopped.", err)
		},
	}
}

// refuseStream answers a streaming call the registry did not admit (a limit, or hangar
// shutting down). A Connect stream's error is its end-of-stream message, under 200, as a
// Connect server sends it: a client maps a bare 429 to unavailable (which E2B's SDK reads as
// "the sandbox is not running"), but reads resource_exhausted here (its RateLimitError).
func (d *daemonProxy) refuseStream(w http.ResponseWriter, r *http.Request, err error) {
	code, status := "unavailable", http.StatusServiceUnavailable
	if le := (*stream.LimitError)(nil); errors.As(err, &le) {
		code, status = "resource_exhausted", http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(le.RetryAfter.Seconds()))))
	}
	msg := problem.Of(err).Message
	ct := r.Header.Get("Content-Type")
	if !isConnectStream(ct) {
		d.refuse(w, r, status, code, msg, nil)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	w.Write(endOfStreamError(code, msg))
}

// isConnectStream says whether a Content-Type is a Connect stream's (application/connect+json,
// application/connect+proto): its messages are enveloped, and it ends with an end-of-stream
// message.
func isConnectStream(ct string) bool { return strings.HasPrefix(ct, "application/connect+") }

// endedError is the Connect error code and sentence of a stream the registry ended.
func endedError(r stream.Reason) (code, msg string) {
	switch r {
	case stream.ReasonRevoked:
		return "unauthenticated", "The hangar token behind this access token was revoked or expired: the stream is closed."
	case stream.ReasonShutdown:
		return "unavailable", "hangar is shutting down: the stream is closed; connect again in a moment."
	case stream.ReasonDestroyed:
		return "unavailable", "The sandbox was destroyed: the stream is closed."
	case stream.ReasonPaused:
		return "unavailable", "The sandbox was paused: the stream is closed."
	case stream.ReasonLifetime:
		return "deadline_exceeded", "The stream was open longer than hangar allows (HANGAR_STREAM_MAX_HOURS): it is closed; open it again."
	}
	return "unavailable", "The stream was closed by hangar (" + string(r) + ")."
}

// refuse answers a call hangar does not pass on: in Connect's error shape ({"code": "...",
// "message": "..."}) for a Connect call, else in envd's ({"code": status, "message": "..."}).
// cause, when set, is logged, never sent.
func (d *daemonProxy) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string, cause error) {
	if cause != nil && status >= 500 {
		d.cfg.Logger.Warn("e2b daemon call refused", "path", r.URL.Path, "sandbox", r.Header.Get(sandboxHeader), "status", status, "err", cause)
	}
	var body any = map[string]any{"code": status, "message": msg}
	if isConnectCall(r.URL.Path) {
		body = map[string]any{"code": code, "message": msg}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// isConnectCall says whether a path is a Connect RPC of envd's services.
func isConnectCall(path string) bool {
	return strings.HasPrefix(path, "/process.Process/") || strings.HasPrefix(path, "/filesystem.Filesystem/")
}
