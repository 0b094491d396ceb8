// Package stream is the one registry that admits every long-lived flow hangar serves — streamed
// execs, process attaches, event, watch and fleet streams, and hangar's own followers — and
// enforces the limits of spec/streaming.md on them: open streams per token (per OAuth grant),
// per user and in all, pacing,
// a byte cap, a lifetime, token rechecks, and ending everything at once on shutdown. It records
// why each stream ended in metrics and a span per stream.
//
// A Stream is a bounded queue between producers, which never block, and one writer goroutine
// per sink (an SSE response, an MCP call), which takes paced batches with Next.
package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
)

// Kind is what a stream carries; it labels metrics and names spans ("stream exec").
type Kind string

// The kinds of stream.
const (
	KindExec    Kind = "exec"
	KindProcess Kind = "process"
	KindEvents  Kind = "events"
	KindWatch   Kind = "watch"
	KindFleet   Kind = "fleet"
	KindTurnLog Kind = "turn_log"
	// KindFollower is hangar's own stream from a background process's daemon.
	KindFollower Kind = "follower"
	// KindE2B is a streaming envd call (Start, Connect, StreamInput, WatchDir) that an E2B SDK
	// makes through hangar's /e2b/sandbox, passed to the sandbox's daemon as it is.
	KindE2B Kind = "e2b"
)

// Reason is why a stream ended. The values are the spec's close reasons.
type Reason string

// The close reasons.
const (
	ReasonDone      Reason = "done"      // the producer finished and everything was sent
	ReasonClient    Reason = "client"    // the client went away
	ReasonShutdown  Reason = "shutdown"  // hangar is shutting down
	ReasonDestroyed Reason = "destroyed" // the sandbox was destroyed
	ReasonPaused    Reason = "paused"    // the sandbox was paused
	ReasonFailed    Reason = "failed"    // the sandbox failed: its daemon, container or pod died
	ReasonRevoked   Reason = "revoked"   // the token was revoked or expired
	ReasonLifetime  Reason = "lifetime"  // open longer than HANGAR_STREAM_MAX_HOURS
	ReasonError     Reason = "error"     // the producer failed
	ReasonLimit     Reason = "limit"     // output outran the pace for longer than the queue holds
	ReasonSlow      Reason = "slow"      // the client stopped reading
)

// Reasons lists every reason, for metrics that should show zeros.
var Reasons = []Reason{ReasonDone, ReasonClient, ReasonShutdown, ReasonDestroyed, ReasonPaused, ReasonFailed, ReasonRevoked, ReasonLifetime, ReasonError, ReasonLimit, ReasonSlow}

// MessageOverhead is what every message costs on top of its bytes, for pacing and caps, so
// output a byte at a time cannot become a flood of notifications.
const MessageOverhead = 64

// Config configures a Registry. Limits come from config.Stream.
type Config struct {
	// MaxPerToken is how many streams one token may hold open. The tokens an OAuth grant
	// issued (a new one at each refresh) count as one. Default 16.
	MaxPerToken int
	// MaxPerUser is how many streams one user may hold open through all its tokens, so that
	// one user with many tokens cannot take the whole of MaxTotal. Admins' users too; hangar's
	// own streams are not counted. Default 128.
	MaxPerUser int
	// MaxTotal is how many streams may be open in all. Default 512.
	MaxTotal int
	// BytesPerSecond paces each stream. Default 1 MiB.
	BytesPerSecond int64
	// MaxBytes caps what one stream sends; past it nothing more is sent. Default 64 MiB.
	MaxBytes int64
	// MaxLifetime ends event and watch streams (Options.Lifetime) open longer. Default 12h.
	MaxLifetime time.Duration
	// Recheck is how often every stream's token is checked again. Default 5s.
	Recheck time.Duration
	// QueueBytes bounds what may wait in one stream's queue. Past it, Send ends the stream
	// (ReasonLimit, or ReasonSlow when the writer stopped taking: SlowIdle) and SendWait
	// waits for room. Default 16 MiB.
	QueueBytes int64
	// SlowIdle is how long a writer must have taken nothing for a Send that finds its queue
	// full to blame the client (ReasonSlow, SlowQueueFull) rather than the output
	// (ReasonLimit). Default 1s: a writer that reads at all takes within a second.
	SlowIdle time.Duration
	// Stall is how long SendWait waits for a writer that takes nothing before it ends the
	// stream (ReasonSlow, SlowStall). Default 30s.
	Stall time.Duration
	// Check says whether a principal's token is still valid for what it opened
	// (auth.Authenticator.Recheck). Nil: tokens are never rechecked.
	Check func(ctx context.Context, p auth.Principal) error
	// Registerer takes the stream metrics. Nil: they are not exported.
	Registerer prometheus.Registerer
	// Tracer makes a span per stream. Nil: no spans.
	Tracer trace.Tracer
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Clock is the clock of pacing, stall detection, idle timeouts, lifetimes, rechecks and
	// first-output times. Default the real clock; tests pass quartz.NewMock.
	Clock quartz.Clock
	// Announce, with several replicas on one database, hears each EndSandbox and EndToken, to
	// pass it on to the other replicas, which end their streams with EndedElsewhere. Nil: this
	// is the only replica.
	Announce func(Ending)
	// Shared, with several replicas on one database, counts each token's (grant's) and each
	// user's open streams across them all, so MaxPerToken and MaxPerUser hold for the whole
	// service. Nil: counted here only.
	Shared SharedCounts
}

// SharedCounts counts open streams across replicas, under keys: a token's id, a grant's
// ("grant "+id), a user's ("user "+name).
type SharedCounts interface {
	// Take counts one more open stream under key, unless max are open under it across the
	// replicas already: then it reports false and counts nothing.
	Take(ctx context.Context, key string, max int) (bool, error)
	// Give counts one fewer.
	Give(key string)
}

// Ending is an EndSandbox or EndToken, as passed between replicas: Sandbox with its Reason, or
// Token (revoked).
type Ending struct {
	Sandbox string
	Reason  Reason
	Token   string
}

func (c *Config) setDefaults() {
	if c.MaxPerToken <= 0 {
		c.MaxPerToken = 16
	}
	if c.MaxTotal <= 0 {
		c.MaxTotal = 512
	}
	if c.MaxPerUser <= 0 {
		c.MaxPerUser = 128
	}
	if c.BytesPerSecond <= 0 {
		c.BytesPerSecond = 1 << 20
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 64 << 20
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = 12 * time.Hour
	}
	if c.Recheck <= 0 {
		c.Recheck = 5 * time.Second
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = 16 << 20
	}
	if c.SlowIdle <= 0 {
		c.SlowIdle = time.Second
	}
	if c.Stall <= 0 {
		c.Stall = 30 * time.Second
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("hangar/stream")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = quartz.NewReal()
	}
}

// LimitError is a stream refused because a limit is reached. Its message names the limit.
type LimitError struct {
	Setting string // the HANGAR_* setting that sets the limit
	Max     int
	// PerToken: the limit is one token's, not all of hangar's.
	PerToken bool
	// Grant, with PerToken: the token's OAuth grant holds them, through its tokens.
	Grant bool
	// User, when set, is the user whose limit it is (all its tokens together).
	User string
	// Of is what is counted, in the plural. "": streams.
	Of string
	// RetryAfter is a hint for when to try again.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	of := e.Of
	if of == "" {
		of = "streams"
	}
	switch {
	case e.User != "":
		return fmt.Sprintf("user %s already has %d %s open through its tokens, the most one user may (%s); close one first", e.User, e.Max, of, e.Setting)
	case e.PerToken && e.Grant:
		return fmt.Sprintf("this token's OAuth grant already has %d %s open through its tokens, the most one token may (%s); close one first", e.Max, of, e.Setting)
	case e.PerToken:
		return fmt.Sprintf("this token already has %d %s open, the most it may (%s); close one first", e.Max, of, e.Setting)
	}
	return fmt.Sprintf("hangar already has %d %s open, the most it may (%s); try again shortly", e.Max, of, e.Setting)
}

// Problem is a limit that names itself.
func (e *LimitError) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeLimit, Message: problem.Sentence(e.Error()), RetryAfter: e.RetryAfter}
}

// ErrShuttingDown refuses new streams once Shutdown was called.
var ErrShuttingDown error = &problem.Sentinel{Text: "hangar is shutting down; no new streams", Code: problem.CodeUnavailable,
	Message: "hangar is shutting down; try again in a moment."}

// Registry admits streams and enforces the limits on them. It is safe for concurrent use.
type Registry struct {
	cfg Config
	m   *metrics

	mu       sync.Mutex // guards the fields below
	streams  map[*Stream]struct{}
	perToken map[string]int // open and reserved streams per token or grant (keys.token)
	perUser  map[string]int // open and reserved streams per user (keys.user)
	reserved int            // streams counted by reserve and not yet opened (see Open)
	closing  bool
}

// keys are what a stream counts under: its token's (the grant's, for a token an OAuth grant
// issued, since each refresh makes a new token) and its user's; "" for neither (hangar's own).
type keys struct{ token, user string }

func keysOf(o Options) keys {
	p := o.Principal
	if p.TokenID == "" || o.Own {
		return keys{}
	}
	k := keys{token: p.TokenID}
	if p.User != "" {
		k.user = "user " + p.User
	}
	if p.Grant != "" {
		k.token = "grant " + p.Grant
	}
	return k
}

// New returns a Registry. Call Run to recheck tokens and lifetimes.
func New(cfg Config) *Registry {
	cfg.setDefaults()
	return &Registry{cfg: cfg, m: newMetrics(cfg.Registerer), streams: map[*Stream]struct{}{}, perToken: map[string]int{}, perUser: map[string]int{}}
}

// Options describe a stream to open.
type Options struct {
	Kind Kind
	// Principal is whose stream it is: its token's (grant's) and its user's limits apply and
	// its token is rechecked. A zero TokenID is hangar's own stream: only the total limit
	// applies.
	Principal auth.Principal
	// Sandbox, when set, ends the stream when that sandbox is destroyed or paused.
	Sandbox string
	// Lifetime makes the stream end after MaxLifetime (event and watch streams).
	Lifetime bool
	// Unpaced exempts hangar's own streams from pacing and the byte cap.
	Unpaced bool
	// Own marks a stream hangar holds on the principal's behalf (a background process's
	// follower): its token is rechecked, but it counts only against the total (neither the
	// token's nor the user's).
	Own bool
	// SandboxFailed, when set, is called (instead of the stream being ended) when Sandbox is
	// found failed: for a stream fed from hangar's store that may still get more (a session's
	// events while a turn is read on without the daemon), whose producer then decides when
	// it ends. It must not block.
	SandboxFailed func()
	// Coalesce, when set, makes the stream tell its writer at most once per Coalesce that
	// something new exists: for a stream whose every item supersedes the ones before (the
	// newest position of a session's events, a watch's), rendered as "it changed" (MCP's
	// resource updates). See coalesce.go. Zero: every item is handed to the writer.
	Coalesce time.Duration
}

// Open admits a stream, or refuses it with a *LimitError or ErrShuttingDown. The caller must
// Close it.
func (r *Registry) Open(ctx context.Context, o Options) (*Stream, error) {
	k := keysOf(o)
	if err := r.reserve(o, k); err != nil {
		return nil, err
	}
	taken, err := r.takeShared(ctx, o, k)
	if err != nil {
		r.unreserve(k)
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := newStream(r, o)
	s.keys, s.shared = k, taken
	_, s.span = r.cfg.Tracer.Start(ctx, "stream "+string(o.Kind), trace.WithSpanKind(trace.SpanKindServer))
	r.streams[s] = struct{}{}
	r.reserved--
	r.m.open.WithLabelValues(string(o.Kind)).Inc()
	return s, nil
}

// limitRetry is the Retry-After of a stream refused for a limit: streams end all the time.
const limitRetry = 5 * time.Second

func (r *Registry) tokenLimit(o Options) *LimitError {
	return &LimitError{Setting: "HANGAR_STREAM_MAX_PER_TOKEN", Max: r.cfg.MaxPerToken, PerToken: true, Grant: o.Principal.Grant != "", RetryAfter: limitRetry}
}

func (r *Registry) userLimit(o Options) *LimitError {
	return &LimitError{Setting: "HANGAR_STREAM_MAX_PER_USER", Max: r.cfg.MaxPerUser, User: o.Principal.User, RetryAfter: limitRetry}
}

// reserve counts a stream about to open against the limits here (k empty: the total only), or
// refuses it. Open turns the reservation into the stream, or undoes it (unreserve).
func (r *Registry) reserve(o Options, k keys) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return ErrShuttingDown
	}
	if len(r.streams)+r.reserved >= r.cfg.MaxTotal {
		return &LimitError{Setting: "HANGAR_STREAM_MAX_TOTAL", Max: r.cfg.MaxTotal, RetryAfter: limitRetry}
	}
	if k.token != "" && r.perToken[k.token] >= r.cfg.MaxPerToken {
		return r.tokenLimit(o)
	}
	if k.user != "" && r.perUser[k.user] >= r.cfg.MaxPerUser {
		return r.userLimit(o)
	}
	r.reserved++
	if k.token != "" {
		r.perToken[k.token]++
	}
	if k.user != "" {
		r.perUser[k.user]++
	}
	return nil
}

func (r *Registry) unreserve(k keys) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved--
	r.uncount(k)
}

// uncount takes a stream of k off the counts here. r.mu is held.
func (r *Registry) uncount(k keys) {
	if k.token != "" {
		if r.perToken[k.token]--; r.perToken[k.token] <= 0 {
			delete(r.perToken, k.token)
		}
	}
	if k.user != "" {
		if r.perUser[k.user]--; r.perUser[k.user] <= 0 {
			delete(r.perUser, k.user)
		}
	}
}

// takeShared counts a stream of k across the replicas (Config.Shared), the token's (grant's)
// count first and the user's second, or refuses it past either limit, counting nothing. taken
// says whether it was counted there (Close gives it back). A count that cannot be read leaves
// this replica's own limits alone to hold.
func (r *Registry) takeShared(ctx context.Context, o Options, k keys) (taken bool, err error) {
	if k.token == "" || r.cfg.Shared == nil {
		return false, nil
	}
	ok, err := r.cfg.Shared.Take(ctx, k.token, r.cfg.MaxPerToken)
	if err != nil {
		r.cfg.Logger.Warn("count the token's streams across replicas", "key", k.token, "err", err)
		return false, nil
	}
	if !ok {
		return false, r.tokenLimit(o)
	}
	if k.user == "" {
		return true, nil
	}
	ok, err = r.cfg.Shared.Take(ctx, k.user, r.cfg.MaxPerUser)
	if err != nil || !ok {
		r.cfg.Shared.Give(k.token)
	}
	if err != nil {
		r.cfg.Logger.Warn("count the user's streams across replicas", "key", k.user, "err", err)
		return false, nil
	}
	if !ok {
		return false, r.userLimit(o)
	}
	return true, nil
}

// release is Stream.Close's part: the stream no longer counts.
func (r *Registry) release(s *Stream) {
	r.mu.Lock()
	if _, ok := r.streams[s]; !ok {
		r.mu.Unlock()
		return
	}
	delete(r.streams, s)
	r.uncount(s.keys)
	r.m.open.WithLabelValues(string(s.opts.Kind)).Dec()
	r.mu.Unlock()
	if s.shared {
		r.cfg.Shared.Give(s.keys.token)
		if s.keys.user != "" {
			r.cfg.Shared.Give(s.keys.user)
		}
	}
}

func (r *Registry) snapshot() []*Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Stream, 0, len(r.streams))
	for s := range r.streams {
		out = append(out, s)
	}
	return out
}

// Count reports how many streams are open here: in all, and for one token (not issued by an
// OAuth grant: see CountUser for a user's).
func (r *Registry) Count(tokenID string) (total, token int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams), r.perToken[tokenID]
}

// CountUser reports how many streams one user's tokens hold open here.
func (r *Registry) CountUser(user string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.perUser["user "+user]
}

// Shutdown refuses new streams and ends every open one at once (ReasonShutdown).
func (r *Registry) Shutdown() {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	for _, s := range r.snapshot() {
		s.End(ReasonShutdown)
	}
}

// EndSandbox ends the streams of a sandbox that was destroyed or paused, and a failed
// sandbox's event streams (ReasonFailed).
func (r *Registry) EndSandbox(name string, reason Reason) {
	r.endSandbox(name, reason)
	if r.cfg.Announce != nil {
		r.cfg.Announce(Ending{Sandbox: name, Reason: reason})
	}
}

// EndedElsewhere ends this replica's streams of what another replica ended (its EndSandbox
// or EndToken), without announcing it again.
func (r *Registry) EndedElsewhere(e Ending) {
	switch {
	case e.Token != "":
		r.endToken(e.Token)
	case e.Sandbox != "" && (e.Reason == ReasonDestroyed || e.Reason == ReasonPaused || e.Reason == ReasonFailed):
		r.endSandbox(e.Sandbox, e.Reason)
	}
}

func (r *Registry) endSandbox(name string, reason Reason) {
	for _, s := range r.snapshot() {
		if s.opts.Sandbox != name {
			continue
		}
		if reason == ReasonFailed && s.opts.Kind != KindEvents {
			// A stream that reads from the sandbox's daemon (an exec, an attach, a watch)
			// ends by itself when the daemon goes, saying more than "failed" (the process
			// lost, the daemon's error); only those fed from hangar's store must be told.
			continue
		}
		if reason == ReasonFailed && s.opts.SandboxFailed != nil {
			s.opts.SandboxFailed()
			continue
		}
		s.End(reason)
	}
}

// EndKind ends every stream of a kind.
func (r *Registry) EndKind(kind Kind, reason Reason) {
	for _, s := range r.snapshot() {
		if s.opts.Kind == kind {
			s.End(reason)
		}
	}
}

// EndToken ends the streams of a token (ReasonRevoked), as a recheck would.
func (r *Registry) EndToken(tokenID string) {
	r.endToken(tokenID)
	if r.cfg.Announce != nil {
		r.cfg.Announce(Ending{Token: tokenID})
	}
}

func (r *Registry) endToken(tokenID string) {
	for _, s := range r.snapshot() {
		if s.opts.Principal.TokenID == tokenID {
			s.End(ReasonRevoked)
		}
	}
}

// Run rechecks every open stream's token each Recheck, ending the streams of tokens no longer
// valid (ReasonRevoked) and those past their lifetime (ReasonLifetime), until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	r.rechecks().Run(ctx, r.rechecked, r.revoked)
}

// recheck is one of Run's rounds.
func (r *Registry) recheck(ctx context.Context) {
	r.rechecks().Round(ctx, r.rechecked(), r.revoked)
}

func (r *Registry) rechecks() auth.Rechecks {
	return auth.Rechecks{Every: r.cfg.Recheck, Check: r.cfg.Check, Clock: r.cfg.Clock,
		Tags: []string{"stream", "recheck"}, Logger: r.cfg.Logger}
}

// revoked ends the streams of a token a recheck found dead.
func (r *Registry) revoked(_ context.Context, tokenID string) { r.endToken(tokenID) }

// rechecked ends the streams past their lifetime and returns the principals of the others,
// for their tokens to be checked again.
func (r *Registry) rechecked() []auth.Principal {
	now := r.cfg.Clock.Now()
	var ps []auth.Principal
	for _, s := range r.snapshot() {
		if s.opts.Lifetime && now.Sub(s.opened) >= r.cfg.MaxLifetime {
			s.End(ReasonLifetime)
			continue
		}
		ps = append(ps, s.opts.Principal)
	}
	return ps
}
