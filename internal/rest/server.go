// Package rest is hangar's HTTP transport: the chi router under /api, bearer-token auth, JSON
// errors, /healthz, /readyz and /metrics, and the server's graceful shutdown. Handlers are thin:
// they decode, call a domain package, and encode.
package rest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/fleet"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/oauthhttp"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/serving"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
	"github.com/hangar-dev/hangar/internal/web"
)

// Config configures the REST server.
type Config struct {
	// Auth checks tokens and manages them. Required.
	Auth *auth.Authenticator
	// Ready answers /readyz: nil when hangar can serve (its store answers, its disk takes a
	// write). An error the problem table calls unavailable (store.ErrFull, ErrUnavailable) is
	// answered with its sentence; any other with "The store does not answer." Required.
	Ready func(ctx context.Context) error
	// Sandboxes serves /api/sandboxes. Required.
	Sandboxes *sandbox.Manager
	// Streams admits every stream. Required.
	Streams *stream.Registry
	// Processes serves the background processes under /api/sandboxes/{ref}/processes. Required.
	Processes *process.Manager
	// Turns, when set, serves /api/sessions and /api/jobs.
	Turns *turns.Service
	// Watches, when set, serves GET /api/sandboxes/{ref}/watch.
	Watches *watch.Service
	// Fleet, when set, serves /api/fleet, its stream and its tickets.
	Fleet *fleet.Service
	// MCP, when set, is served at /mcp (it does its own bearer-token auth).
	MCP http.Handler
	// Taken keeps the connections SSE streams take over from net/http (theirs and the MCP
	// handler's: mcp.Config.Taken), which Shutdown closes when its grace runs out, as net/http
	// does not. Default: one of the server's own.
	Taken *serving.TakenConns
	// E2B, when set, is served at /e2b: hangar's E2B-compatible API (internal/e2bapi), which
	// checks its own API keys.
	E2B http.Handler
	// E2BSandbox, when set, is served at /e2b/sandbox, the prefix stripped: E2B's SDKs' daemon
	// calls (E2B_SANDBOX_URL, e2bapi.NewDaemon), which check their own access tokens and take
	// bodies of any size (file uploads).
	E2BSandbox http.Handler
	// OAuth, when set, serves the OAuth authorization server and /mcp's protected resource
	// metadata (outside /api, without bearer tokens), and /api/oauth/grants.
	OAuth *oauth.Server
	// OAuthHTTP configures the OAuth endpoints (oauthhttp): their limits per client address.
	OAuthHTTP oauthhttp.Config
	// Registry is served at /metrics; the server adds its HTTP metrics to it. Required.
	Registry *prometheus.Registry
	// MetricsElsewhere: the Registry is served on a listener of its own (HANGAR_METRICS_LISTEN),
	// so this server has no /metrics. Default false: it serves /metrics.
	MetricsElsewhere bool
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies (413 past it). Default 1 MiB.
	MaxBodyBytes int64
	// BodyTimeout is how long a request body may take to arrive, plus a second for every
	// BodyMinRate bytes of it that arrived (408 past it; bodyDeadline). Default 30s.
	BodyTimeout time.Duration
	// BodyMinRate is the rate, in bytes per second, that earns a body time beyond BodyTimeout.
	// Default 64 KiB.
	BodyMinRate int64
	// Clock stamps what the API computes from now (a token's expires_in). Default the real
	// clock. Connections' read and write deadlines are on the wall clock whatever it is: the
	// kernel, not hangar, reads them.
	Clock quartz.Clock
	// Forward, with several replicas on one database, passes requests about a sandbox's
	// processes on to the replica that follows them. Nil: this is the only replica.
	Forward *forward.Forwarder
}

// Server is the one listener's HTTP server.
type Server struct {
	srv *http.Server
	log *slog.Logger

	mu       sync.Mutex
	draining bool // set by Drain: no listener is served from then on
	lns      []net.Listener

	requests serving.InFlight    // requests past the gate and not yet answered; closed by Drain
	taken    *serving.TakenConns // connections SSE streams took over, which net/http does not close
}

// api holds what handlers share.
type api struct {
	Config
	log *slog.Logger
}

// readyTimeout bounds /readyz's store ping: a store slower than this is not ready.
const readyTimeout = 2 * time.Second

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.BodyMinRate <= 0 {
		cfg.BodyMinRate = 64 << 10
	}
	if cfg.Taken == nil {
		cfg.Taken = new(serving.TakenConns)
	}
	a := &api{Config: cfg, log: cfg.Logger}
	s := &Server{log: cfg.Logger, taken: cfg.Taken}

	r := chi.NewRouter()
	// GrowStack before anything goes deeper; bodyDeadline next: it needs net/http's own
	// ResponseWriter to set read deadlines.
	r.Use(serving.GrowStack, a.bodyDeadline, s.gate, newHTTPMetrics(cfg.Registry).middleware, a.limitBody)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, newError(CodeNotFound, "There is nothing at "+r.URL.Path+".", nil))
	})
	mux := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// The methods the path takes, as RFC 9110 asks of a 405 (chi's own 405 says them; a
		// handler of one's own must find them).
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		a.writeError(w, r, newError(CodeMethod, r.Method+" is not allowed on "+r.URL.Path+"; it takes "+strings.Join(allow, ", ")+".", nil))
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.ready(a))
	if !cfg.MetricsElsewhere {
		r.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	}
	if cfg.MCP != nil {
		r.Handle("/mcp", cfg.MCP)
	}
	if cfg.E2B != nil {
		r.Mount("/e2b", cfg.E2B)
	}
	if cfg.E2BSandbox != nil {
		r.Mount(e2bSandboxPrefix, http.StripPrefix(e2bSandboxPrefix, cfg.E2BSandbox))
	}
	if cfg.OAuth != nil {
		r.Group(oauthhttp.New(cfg.OAuth, cfg.OAuthHTTP).Routes)
	}
	if cfg.Fleet != nil {
		r.Get("/fleet", http.RedirectHandler("/fleet/", http.StatusMovedPermanently).ServeHTTP)
		r.Handle("/fleet/*", web.Handler("/fleet/"))
		// hangar's address opened in a browser leads to the page (302: / may serve more one
		// day, and a browser must not remember this).
		r.Get("/", http.RedirectHandler("/fleet/", http.StatusFound).ServeHTTP)
		// The sign-in ticket in its body is its credential: no token (see fleetSignIn).
		r.Post("/api/fleet/sign-in", a.fleetSignIn)
	}
	r.Route("/api", func(r chi.Router) {
		r.Use(a.authenticate)
		r.Get("/whoami", a.whoami)
		r.Post("/tokens", a.createToken)
		r.Get("/tokens", a.listTokens)
		r.Delete("/tokens/{id}", a.revokeToken)
		if cfg.OAuth != nil {
			r.Get("/oauth/grants", a.listGrants)
			r.Delete("/oauth/grants/{id}", a.revokeGrant)
		}
		r.Route("/sandboxes", a.sandboxRoutes)
		if cfg.Turns != nil {
			r.Group(a.turnsRoutes)
		}
		if cfg.Fleet != nil {
			r.Group(a.fleetRoutes)
		}
	})
	s.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1 and h2c, HTTP/2 without TLS with prior knowledge (`curl
	// --http2-prior-knowledge`, a Go client with Protocols.SetUnencryptedHTTP2): an HTTP/2
	// client holds many streams on one connection, and each costs hangar one goroutine where an
	// HTTP/1.1 connection costs two (bench/README.md: goroutines a stream). Behind a TLS proxy
	// nothing changes: it speaks HTTP/1.1 to hangar, or h2c when told to.
	if err := serving.H2C(s.srv); err != nil {
		panic("serve h2c: " + err.Error()) // only a TLS config could make it fail; there is none
	}
	return s
}

// Handler returns the server's routes, for tests that serve them themselves.
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// Serve serves on ln until Shutdown. It returns nil after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	err := s.srv.Serve(ln)
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if errors.Is(err, http.ErrServerClosed) || (draining && errors.Is(err, net.ErrClosed)) {
		return nil
	}
	return err
}

// Drain stops accepting connections and answers 503 to every request that starts from now on
// (net/http's own Shutdown would drop them unanswered); the requests in flight go on. Shutdown
// drains too: call Drain first when something must wait for the requests in flight (the MCP
// handler's Shutdown) while no new one may begin.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	s.requests.Close()
	lns := s.lns
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
}

// Shutdown drains (Drain), waits for the requests in flight until ctx ends, and then closes the
// connections. Long-lived streams must have been ended first. Calling it again waits for the
// same drain.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	select {
	case <-s.requests.Idle():
	case <-ctx.Done():
		s.log.Warn("shutdown grace period over; closing the requests still running")
		s.taken.CloseAll()
		return s.srv.Close()
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// gate counts requests in flight and refuses those that start after Shutdown began.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.requests.Enter() {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			if forward.Forwarded(r) {
				// Refused before anything was done: the replica that forwarded it sends it to
				// the sandbox's new owner instead of passing this on.
				w.Header().Set(forward.MovedHeader, "shutting down")
			}
			var body errorBody
			body.Error.Code, body.Error.Message = CodeUnavailable, "hangar is shutting down; try again in a moment."
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		defer s.requests.Leave()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) ready(a *api) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := a.Ready(ctx); err != nil {
			// What is missing, in the table's sentence ("hangar's disk is full", "hangar's
			// database does not answer"), whatever the check found; 503 always.
			if problem.Of(err).Code != CodeUnavailable {
				err = newError(CodeUnavailable, "The store does not answer.", err)
			}
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// e2bSandboxPrefix is where Config.E2BSandbox is served.
const e2bSandboxPrefix = "/e2b/sandbox"

// limitBody caps every request body at MaxBodyBytes; /mcp caps its own (mcp.Config.MaxBodyBytes,
// given the same), to answer in JSON-RPC, and E2B's daemon calls pass theirs to the sandbox's
// daemon as they come (a file upload of any size, never held whole).
func (a *api) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" || (a.E2BSandbox != nil && strings.HasPrefix(r.URL.Path, e2bSandboxPrefix+"/")) {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > a.MaxBodyBytes {
			a.writeError(w, r, newError(CodeTooLarge, "The request body is too large.", errors.New("Content-Length is over the limit of "+problem.Bytes(a.MaxBodyBytes))))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// authenticate requires a valid bearer token and puts its principal in the request's context.
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearer(r)
		if !ok && a.Fleet != nil && r.URL.Path == fleetStreamPath && r.URL.Query().Has("ticket") {
			a.ticketed(next, w, r)
			return
		}
		if !ok {
			a.writeError(w, r, auth.ErrNoToken)
			return
		}
		p, err := a.Auth.Authenticate(r.Context(), secret)
		if err == nil && p.Audience != "" {
			// A token with an audience (an OAuth access token) was issued for that one resource,
			// /mcp (RFC 8707), not for the REST API, whatever its scopes.
			err = auth.ErrAudience
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// ticketed serves a fleet stream opened with a one-time ticket (a browser's EventSource cannot
// send a bearer token): as the token that asked for the ticket, if it is still valid.
func (a *api) ticketed(next http.Handler, w http.ResponseWriter, r *http.Request) {
	p, err := a.Fleet.RedeemTicket(r.Context(), r.URL.Query().Get("ticket"))
	if err == nil {
		err = a.Auth.Check(r.Context(), p)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context()) // always there under /api: authenticate put it
	return p
}
