package mcp

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/serving"
)

// sessions tracks the 2025-era sessions (initialize, Mcp-Session-Id) of each token, so that a
// token holds at most max of them and a revoked token's are closed. The SDK owns the sessions
// (and closes idle ones, StreamableHTTPOptions.SessionTimeout); this records only which token
// opened which, by session id, and asks the SDK which are still open.
type sessions struct {
	max int

	mu      sync.Mutex // guards byToken
	byToken map[string]*tokenSessions
}

// tokenSessions are one token's sessions.
type tokenSessions struct {
	p       auth.Principal
	ids     map[string]struct{} // sessions opened, some perhaps closed since
	pending int                 // initialize requests admitted whose session is not recorded yet
}

func newSessions(max int) *sessions {
	return &sessions{max: max, byToken: map[string]*tokenSessions{}}
}

// reserve admits one more session for p, or says false when p's token holds max already.
// live is the set of session ids the SDK has open. An admitted caller must call settle.
func (s *sessions) reserve(p auth.Principal, live map[string]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.byToken[p.TokenID]
	if ts == nil {
		ts = &tokenSessions{p: p, ids: map[string]struct{}{}}
		s.byToken[p.TokenID] = ts
	}
	for id := range ts.ids {
		if !live[id] {
			delete(ts.ids, id) // closed: by its client, by the idle timeout, or by a revocation
		}
	}
	if len(ts.ids)+ts.pending >= s.max {
		return false
	}
	ts.pending++
	return true
}

// settle ends a reservation: id is the session the request opened, "" if it opened none.
func (s *sessions) settle(tokenID, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.byToken[tokenID]
	ts.pending--
	if id != "" {
		ts.ids[id] = struct{}{}
	}
	if len(ts.ids) == 0 && ts.pending == 0 {
		delete(s.byToken, tokenID)
	}
}

// tokens returns the principals that have sessions recorded.
func (s *sessions) tokens() []auth.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]auth.Principal, 0, len(s.byToken))
	for _, ts := range s.byToken {
		out = append(out, ts.p)
	}
	return out
}

// drop forgets a token's sessions and returns their ids.
func (s *sessions) drop(tokenID string) map[string]struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.byToken[tokenID]
	if ts == nil {
		return nil
	}
	if ts.pending == 0 {
		delete(s.byToken, tokenID)
	}
	ids := ts.ids
	ts.ids = map[string]struct{}{}
	return ids
}

// liveSessions returns the ids of the sessions the SDK has open.
func (h *Handler) liveSessions() map[string]bool {
	live := map[string]bool{}
	for ss := range h.server.Sessions() {
		if id := ss.ID(); id != "" {
			live[id] = true
		}
	}
	return live
}

// Sessions returns how many 2025-era sessions a token has open or being opened (an initialize
// in flight), for monitoring and tests.
func (h *Handler) Sessions(tokenID string) int {
	live := h.liveSessions()
	h.sessions.mu.Lock()
	defer h.sessions.mu.Unlock()
	n := 0
	if ts := h.sessions.byToken[tokenID]; ts != nil {
		n = ts.pending
		for id := range ts.ids {
			if live[id] {
				n++
			}
		}
	}
	return n
}

// Run checks every Recheck that the tokens holding sessions are still valid, and closes the
// sessions of those that are not (revoked, expired, deleted): their GET streams end with them.
// It returns when ctx ends.
func (h *Handler) Run(ctx context.Context) {
	rechecks := auth.Rechecks{Every: h.cfg.Recheck, Check: h.cfg.Check, Clock: h.cfg.Clock,
		Tags: []string{"mcp", "recheck"}, Logger: h.log}
	rechecks.Run(ctx, h.sessions.tokens, h.revoked)
}

// revoked closes the sessions of a token a recheck found dead.
func (h *Handler) revoked(ctx context.Context, tokenID string) {
	h.closeSessions(ctx, h.sessions.drop(tokenID))
}

// closeWait bounds how long closing a revoked token's session waits for its calls in flight.
const closeWait = 5 * time.Second

// closeSessions closes the open sessions among ids. It first waits, up to closeWait, for the
// session's calls in flight to be answered — a streamed call of a revoked token ends at once
// (stream.ReasonRevoked) and its result says so, but the session's end cut that answer off when
// it came first, and the client saw "request terminated without response".
func (h *Handler) closeSessions(ctx context.Context, ids map[string]struct{}) {
	var close []*mcp.ServerSession
	for ss := range h.server.Sessions() {
		if _, ok := ids[ss.ID()]; ok {
			close = append(close, ss)
		}
	}
	for _, ss := range close {
		idle, busy := h.calls.idle(ss.ID())
		if busy {
			timer := h.cfg.Clock.NewTimer(closeWait, "mcp", "close")
			select {
			case <-idle:
				// Answered; the client reads the answer on the call's own stream while the
				// session's end reaches it on another (its GET stream), and a client that
				// takes the second first fails the call. Give it closeGrace to read.
				timer.Reset(closeGrace, "mcp", "close")
				select {
				case <-timer.C:
				case <-ctx.Done():
				}
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		}
		ss.Close()
	}
}

// closeGrace is how long a revoked token's session stays open after its last call was
// answered, for the client to read that answer before the session's end.
const closeGrace = time.Second

// calls counts each 2025-era session's requests being served (its POSTs), so that a session
// is closed only once they are answered.
type calls struct {
	all  serving.InFlight // every session's requests being served
	mu   sync.Mutex
	n    map[string]int             // session id → requests being served
	zero map[string][]chan struct{} // session id → closed when its count falls to 0
}

// begin counts a request of session id; the returned func ends it.
func (c *calls) begin(id string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.zero = map[string]int{}, map[string][]chan struct{}{}
	}
	c.n[id]++
	c.all.Enter()
	return func() {
		c.all.Leave()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n[id]--; c.n[id] > 0 {
			return
		}
		delete(c.n, id)
		for _, ch := range c.zero[id] {
			close(ch)
		}
		delete(c.zero, id)
	}
}

// idle returns a channel closed once session id has no request being served, and whether it
// had one when asked.
func (c *calls) idle(id string) (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n[id] == 0 {
		close(ch)
		return ch, false
	}
	c.zero[id] = append(c.zero[id], ch)
	return ch, true
}
