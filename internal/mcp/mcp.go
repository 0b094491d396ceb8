// Package mcp is hangar's MCP transport: one endpoint (/mcp) serving both protocol eras over one
// *mcp.Server from github.com/modelcontextprotocol/go-sdk. Requests whose MCP-Protocol-Version is
// 2026-07-28 or later go to a stateless streamable handler (server/discover, subscriptions/listen);
// older ones (initialize, sessions, the GET stream) to a stateful one. Every request needs a
// bearer token with the mcp scope.
//
// Tools are thin: they decode, call a domain package (sandbox, stream) and encode. A tool-level
// failure (bad input, an unknown sandbox, a refused stream) is a tool error, an IsError result
// whose text is a sentence for a person; protocol errors are the SDK's (see errors.go).
package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/serving"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
)

// Config configures the MCP endpoint.
type Config struct {
	// Auth verifies bearer tokens (they need the mcp scope). Required.
	Auth *auth.Authenticator
	// Resource is /mcp's canonical URL (RFC 8707), e.g. https://hangar.example.com/mcp: an
	// OAuth access token issued for another resource is refused. Default "": OAuth is off, and
	// only tokens with no audience are accepted.
	Resource string
	// ResourceMetadataURL is where the protected resource metadata (RFC 9728) is served; a
	// 401 or 403 from /mcp names it in WWW-Authenticate. Default "": not named.
	ResourceMetadataURL string
	// Sandboxes runs the tools' commands. Required.
	Sandboxes *sandbox.Manager
	// Streams admits streamed execs. Required.
	Streams *stream.Registry
	// Processes runs background processes: the process and terminal_* tools. Nil: those
	// tools are not offered.
	Processes *process.Manager
	// Forward, with several replicas on one database, passes 2026-07-28 process tool calls
	// on to the replica that follows the sandbox's processes, and a 2025-era session's
	// requests to the replica that holds the session (replicas.go). Nil: alone.
	Forward *forward.Forwarder
	// Replicas, with Forward, names this replica in the ids of the 2025-era sessions it opens
	// and says where the replica named in another session's id is reached, so that a session
	// is usable through any replica (replicas.go). Nil: alone, and session ids name no
	// replica.
	Replicas Replicas
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Version is the server version MCP clients are told. Default "dev".
	Version string
	// MaxBodyBytes caps a request's body: past it, 413 and a JSON-RPC error naming the cap
	// (HANGAR_MAX_BODY_BYTES). Default 4 MiB, the SDK's own cap.
	MaxBodyBytes int64
	// KeepAlive is how often an open, idle response stream gets an SSE comment, so proxies do
	// not time it out. Default 15s.
	KeepAlive time.Duration
	// Taken keeps the connections of response streams taken over from net/http (sink.take), for
	// the server to close when its shutdown's grace runs out: the REST server's
	// (rest.Config.Taken). Default: one of the handler's own.
	Taken *serving.TakenConns
	// WriteTimeout bounds each write to a client. A client that has not taken a write in this
	// long has stopped reading: its streamed exec ends (stream.ReasonSlow). Default 30s.
	WriteTimeout time.Duration
	// SessionIdle closes a 2025-era session that has had no request for this long (a GET
	// stream open is not a request: a client that only listens must ping). Default 30m.
	SessionIdle time.Duration
	// SessionsPerToken is how many 2025-era sessions one token may hold open; one more
	// initialize is refused (HTTP 429). Default 32.
	SessionsPerToken int
	// Recheck is how often Run checks that the tokens holding sessions are still valid.
	// Default 5s.
	Recheck time.Duration
	// Check says whether a token holding a session is still valid (its recheck, not a new
	// request). Default Auth.Recheck.
	Check func(ctx context.Context, p auth.Principal) error
	// Clock times Run's rechecks, the keep-alives of response streams and the shutdown's
	// grace. Default the real clock. (Subscriptions' notifications are paced by their
	// streams, on the registry's clock.)
	Clock quartz.Clock
	// Watches, when set, serves the watch resource hangar://sandboxes/<sandbox>/watch?path=<dir>.
	Watches *watch.Service
	// Turns serves the sessions, turns and jobs: the session, turn and job tools, and the
	// event resources and their subscriptions (resources.go, subscribe.go). Nil: none of
	// those are offered.
	Turns *turns.Service
}

// newProtocol is the first protocol revision served statelessly.
const newProtocol = "2026-07-28"

// Handler serves /mcp. Call Shutdown when the server stops.
type Handler struct {
	cfg    Config
	log    *slog.Logger
	server *mcp.Server
	authed http.Handler // serve behind the bearer-token check
	// checking holds, per request whose token is being checked, where the verifier leaves a
	// failure that is not the token's fault (*error, a jsonErrors' verifyErr).
	checking  sync.Map
	stateless http.Handler
	stateful  http.Handler

	sinks    sync.Map // sink id (string) → *sink: the response streams being served
	nextID   atomic.Uint64
	running  serving.InFlight // exec and attach calls and listens in flight, counted until their response is written
	sessions *sessions        // the 2025-era sessions of each token
	calls    calls            // the 2025-era sessions' requests being served
	subs     *subscriptions
}

// New returns the /mcp handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = maxBody
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Taken == nil {
		cfg.Taken = new(serving.TakenConns)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 30 * time.Minute
	}
	if cfg.SessionsPerToken <= 0 {
		cfg.SessionsPerToken = 32
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 5 * time.Second
	}
	if cfg.Check == nil {
		cfg.Check = cfg.Auth.Recheck
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.SessionsPerToken), subs: newSubscriptions()}
	instructions := "hangar gives you sandboxes. Run commands in one with the exec tool; pass stream: true " +
		"with a progress token to see the output as it prints."
	if cfg.Processes != nil {
		instructions += " For commands that run on (servers, long builds), use the process tool: start, then " +
			"attach with since = the next of the previous attach; terminal_open gives you a shell to poll."
	}
	opts := &mcp.ServerOptions{
		Instructions: instructions,
		GetSessionID: h.newSessionID,
		Logger:       quieter(cfg.Logger),
		// Tools, and resources with the turns: hangar sends no log messages and has no
		// prompts, so it declares neither.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	}
	if cfg.Turns != nil {
		opts.Instructions += turnsInstructions
	}
	if cfg.Watches != nil {
		opts.Instructions += watchInstructions
	}
	if cfg.Turns != nil || cfg.Watches != nil {
		opts.Capabilities.Resources = &mcp.ResourceCapabilities{Subscribe: true}
		opts.SubscribeHandler, opts.UnsubscribeHandler = h.subscribe, h.unsubscribe
	}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "hangar", Version: cfg.Version}, opts)
	h.addExec()
	if cfg.Processes != nil {
		h.addProcess()
		h.addTerminals()
	}
	if cfg.Turns != nil {
		h.addTurns()
		h.addResources()
	}
	if cfg.Watches != nil {
		h.addWatchResource()
	}
	if cfg.Turns != nil || cfg.Watches != nil {
		h.server.AddSendingMiddleware(h.deliverUpdates)
		h.server.AddReceivingMiddleware(h.endableListens, h.subscribed)
	}
	getServer := func(*http.Request) *mcp.Server { return h.server }
	// Never JSONResponse: progress notifications travel on the call's response stream.
	h.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, PropagateRequestCancellation: true, Logger: quieter(cfg.Logger),
	})
	h.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		PropagateRequestCancellation: true, Logger: quieter(cfg.Logger), SessionTimeout: cfg.SessionIdle,
	})
	h.authed = sdkauth.RequireBearerToken(verifier(cfg.Auth, cfg.Resource, &h.checking), &sdkauth.RequireBearerTokenOptions{
		AllowMissingExpiration: true, Scopes: []string{string(auth.ScopeMCP)},
	})(http.HandlerFunc(h.serve))
	return h
}

// sinkHeader carries a request's sink id from ServeHTTP to the tool handlers, which see the
// request's headers (RequestExtra.Header). A client's own value is replaced.
const sinkHeader = "X-Hangar-Mcp-Sink"

// ServeHTTP checks the bearer token and routes the request to the handler of its era, through
// a sink that adds keep-alives and X-Accel-Buffering to response streams. Errors the SDK or the
// token check would answer in plain text are answered in JSON (see httperrors.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j := &jsonErrors{w: w, metadataURL: h.cfg.ResourceMetadataURL, hadToken: r.Header.Get("Authorization") != ""}
	h.checking.Store(r, &j.verifyErr) // the SDK hands the verifier this very request
	h.authed.ServeHTTP(j, r)
	h.checking.Delete(r)
	if j.verifyErr != nil {
		h.log.Warn("mcp: the token could not be checked", "err", j.verifyErr)
	}
	j.finish()
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if !checkBody(w, r, h.cfg.MaxBodyBytes) || h.toHolder(w, r) || h.toOwner(w, r, http.HandlerFunc(h.serveHere)) {
		return
	}
	h.serveHere(w, r)
}

// serveHere serves a request on this replica.
func (h *Handler) serveHere(w http.ResponseWriter, r *http.Request) {
	id := strconv.FormatUint(h.nextID.Add(1), 10)
	var gone context.CancelFunc
	if serving.Takes(r) {
		// An event stream's connection may be taken over (sink.take), after which net/http no
		// longer ends the request's context when its client goes: the sink's read of the
		// connection does, through this one.
		var ctx context.Context
		ctx, gone = context.WithCancel(r.Context())
		defer gone()
		r = r.WithContext(ctx)
	}
	s := newSink(w, r.Context(), h.cfg.KeepAlive, h.cfg.WriteTimeout, h.cfg.Clock)
	if gone != nil {
		s.mayTake(h.cfg.Taken, gone)
	}
	h.sinks.Store(id, s)
	defer h.sinks.Delete(id)
	defer s.close() // after the SDK returned: no write of the SDK's can follow
	r.Header.Set(sinkHeader, id)
	switch {
	case r.Header.Get("Mcp-Protocol-Version") >= newProtocol:
		h.stateless.ServeHTTP(s, r)
	case r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "":
		h.newSession(s, r)
	default:
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && r.Method == http.MethodPost {
			defer h.calls.begin(sid)()
		}
		h.stateful.ServeHTTP(s, r)
	}
}

// newSession serves a 2025-era request that opens a session (an initialize), within the
// token's cap on sessions.
func (h *Handler) newSession(w http.ResponseWriter, r *http.Request) {
	p, _ := principalFromTokenInfo(sdkauth.TokenInfoFromContext(r.Context()))
	if !h.sessions.reserve(p, h.liveSessions()) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(h.cfg.SessionIdle.Seconds()))))
		writeError(w, http.StatusTooManyRequests, codeTooManySessions, fmt.Sprintf("This token already has %d MCP sessions open, "+
			"the most it may (HANGAR_MCP_SESSIONS_PER_TOKEN): end one (DELETE /mcp with its Mcp-Session-Id) or wait for "+
			"one to be idle for HANGAR_MCP_SESSION_IDLE_SECONDS.", h.cfg.SessionsPerToken), "")
		return
	}
	opened := ""
	defer func() { h.sessions.settle(p.TokenID, opened) }()
	h.stateful.ServeHTTP(w, r)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" && h.liveSessions()[id] {
		opened = id
	}
}

// sinkOf returns the response stream of the request a tool call came in on, if it is known.
func (h *Handler) sinkOf(header http.Header) *sink {
	if header == nil {
		return nil
	}
	v, ok := h.sinks.Load(header.Get(sinkHeader))
	if !ok {
		return nil
	}
	return v.(*sink)
}

// Shutdown ends the MCP side for a server shutdown: it ends each subscriptions/listen with its
// final result, waits (until ctx ends) for those results, for the streamed calls in flight to
// send theirs — the stream registry's Shutdown, called first, makes them finish at once — and
// for every other request of a 2025-era session to be answered (a plain exec runs its command
// to its end: closing its session first answered it with an empty stream), and then closes
// every session, which ends the 2025-era GET streams, and waits for the subscriptions to end.
// Call it after the server's gate closed, so no new call begins, and before the HTTP server's
// Shutdown.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.subs.endListens()
	var err error
	select {
	case <-h.running.Idle():
	case <-ctx.Done():
		err = ctx.Err()
	}
	if idle := h.calls.all.Idle(); !closed(idle) {
		select {
		case <-idle:
			// Answered; the client reads each answer on the call's own stream while the
			// session's end reaches it on its GET stream, and one that takes the second first
			// fails the call (see closeSessions): give it closeGrace to read.
			timer := h.cfg.Clock.NewTimer(closeGrace, "mcp", "shutdown")
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	for ss := range h.server.Sessions() {
		ss.Close()
	}
	if werr := h.waitSubscriptions(ctx); err == nil {
		err = werr
	}
	return err
}

// closed reports whether ch is closed (it is never sent on).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// principal is the caller of a tool: the TokenInfo the SDK passes with the request, else the
// one the bearer-token middleware put in ctx.
func principal(ctx context.Context, req *mcp.CallToolRequest) (auth.Principal, bool) {
	var info *sdkauth.TokenInfo
	if req.Extra != nil {
		info = req.Extra.TokenInfo
	}
	if info == nil {
		info = sdkauth.TokenInfoFromContext(ctx)
	}
	return principalFromTokenInfo(info)
}

// quieter is log for the SDK, which logs every session's start and end at info: only its
// warnings and errors get through.
func quieter(log *slog.Logger) *slog.Logger { return slog.New(warnHandler{log.Handler()}) }

type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as)}
}
func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name)}
}
