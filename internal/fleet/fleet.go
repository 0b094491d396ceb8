// Package fleet is a person's agents at a glance: every session and job as one unit (its
// sandbox, its current turn, what it did last, what it cost), the inbox of what needs the
// person, and a summary; read once (Read) or live as it changes (Stream), with one-time tickets
// that let a browser open the stream.
//
// The fleet is read from the store, which is the truth for every replica: a person's feed
// rebuilds it every Poll while someone follows it, and sends what changed.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Errors, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrForbidden: the token may not see that fleet (not a person's token, or another
	// person's fleet without the admin scope).
	ErrForbidden error = &problem.Sentinel{Text: "not allowed to see that fleet", Code: problem.CodeForbidden,
		Message: "This token may not see that fleet."}
	// ErrTicket: the ticket is unknown, used already, or expired.
	ErrTicket error = &problem.Sentinel{Text: "the ticket is not valid: it is unknown, used already or expired", Code: problem.CodeUnauthorized,
		Message: "The ticket is not valid: it is unknown, used already or expired; ask for a new one (POST /api/fleet/tickets)."}
	// ErrSignIn: the sign-in ticket is unknown, used already, or expired.
	ErrSignIn error = &problem.Sentinel{Text: "the sign-in ticket is not valid: it is unknown, used already or expired", Code: problem.CodeUnauthorized,
		Message: "This sign-in link was used already, has expired (it works once, within a minute of being made), or was never made: run hangar fleet --web again, or paste a token.", Quiet: true}
	// ErrTooManyTickets: the token holds as many unused tickets as it may; it comes wrapped
	// with the bound, which is what a client is told.
	ErrTooManyTickets error = &problem.Sentinel{Text: "too many unused tickets", Code: problem.CodeLimit, RetryAfter: 10 * time.Second, Quiet: true}
	// ErrInvalid: the request names no user there could be.
	ErrInvalid error = &problem.Sentinel{Text: "invalid fleet request", Code: problem.CodeBadRequest, Message: "The fleet request is not valid."}
)

// Config configures a Service.
type Config struct {
	// Store is where sessions, turns, jobs, events and sandboxes are read. Required.
	Store store.Store
	// Processes, when set, adds the processes that exited non-zero to the inbox.
	Processes *process.Manager
	// Streams admits fleet streams. Required for Stream.
	Streams *stream.Registry
	// Poll is how often a followed fleet is read again. Default 1s.
	Poll time.Duration
	// Coalesce is the least time between two agent events of one unit. Default 2s.
	Coalesce time.Duration
	// Retention is how long sent changes are kept for a reconnecting client (Last-Event-ID), and
	// how long a person's feed lingers after its last follower left. Default 5m.
	Retention time.Duration
	// InboxWindow is how far back the inbox looks. Default 24h.
	InboxWindow time.Duration
	// StuckAfter marks a running unit stuck when nothing was recorded for it this long.
	// Default 10m.
	StuckAfter time.Duration
	// TicketTTL is how long a ticket may wait to be used. Default 60s.
	TicketTTL time.Duration
	// Clock times polls, coalescing, retention and tickets. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Service serves fleets. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex // guards feeds, caches and closed
	feeds  map[string]*feed
	caches map[string]*cache // per person: what was learnt from their sessions' events
	closed bool

	ctx    context.Context // the root of the feeds; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	swept atomic.Int64 // when expired tickets were last deleted (Unix nanoseconds)
}

// New returns a Service. Close it when the server stops.
func New(cfg Config) *Service {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Poll, time.Second)
	def(&cfg.Coalesce, 2*time.Second)
	def(&cfg.Retention, 5*time.Minute)
	def(&cfg.InboxWindow, 24*time.Hour)
	def(&cfg.StuckAfter, 10*time.Minute)
	def(&cfg.TicketTTL, time.Minute)
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger, feeds: map[string]*feed{}, caches: map[string]*cache{}, ctx: ctx, cancel: cancel}
}

// Close stops the feeds; their streams end (shutdown).
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// whose returns the person whose fleet p asks for: p's own (user ""), or, for an admin, any.
// Only a person's token sees a fleet: not one bound to a sandbox, nor a jobs-only or
// MCP-only one.
func whose(p auth.Principal, user string) (string, error) {
	if p.Sandbox != "" || !p.Has(auth.ScopeUser) {
		return "", fmt.Errorf("%w: the fleet is a person's view, for a token with the user scope that is not bound to a sandbox", ErrForbidden)
	}
	if user == "" || user == p.User {
		return p.User, nil
	}
	if err := auth.CheckUserName(user); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !p.IsAdmin() {
		return "", fmt.Errorf("%w: only an admin may see another person's fleet", ErrForbidden)
	}
	return user, nil
}

// Read returns the fleet of user ("" for p's own) as it is now.
func (s *Service) Read(ctx context.Context, p auth.Principal, user string) (Fleet, error) {
	u, err := whose(p, user)
	if err != nil {
		return Fleet{}, err
	}
	return s.build(ctx, u)
}

// cacheOf returns user's cache, made on first use.
func (s *Service) cacheOf(user string) *cache {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.caches[user]
	if !ok {
		c = newCache()
		s.caches[user] = c
	}
	return c
}
