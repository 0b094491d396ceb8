package fleet

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
)

// ticketPrefix starts every ticket, so one is recognisable in a log or a URL.
const ticketPrefix = "hft_"

// tickets are one-time passes that let a browser open its person's fleet stream: an
// EventSource cannot send an Authorization header. Only a hash of each is kept.
type tickets struct {
	clock quartz.Clock
	ttl   time.Duration

	mu sync.Mutex
	m  map[string]ticket // by the ticket's hash
	n  map[string]int    // live tickets per token id
}

// maxTicketsPerToken bounds the tickets one token may hold unused, and pruneAt the tickets
// held in all before the expired ones are swept out: asking again and again grows nothing.
const (
	maxTicketsPerToken = 8
	pruneAt            = 1024
)

type ticket struct {
	p       auth.Principal // the person's token that asked, without its secret (hangar never has it)
	expires time.Time
}

// Ticket is a ticket made for a browser.
type Ticket struct {
	Ticket    string `json:"ticket"`
	ExpiresAt Stamp  `json:"expires_at"`
}

// IssueTicket makes a ticket for p's own fleet, usable once within TicketTTL.
func (s *Service) IssueTicket(p auth.Principal) (Ticket, error) {
	if _, err := whose(p, ""); err != nil {
		return Ticket{}, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Ticket{}, fmt.Errorf("make a ticket: %w", err)
	}
	secret := ticketPrefix + base64.RawURLEncoding.EncodeToString(b)
	t := &s.tickets
	now := t.clock.Now()
	expires := now.Add(t.ttl)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= pruneAt || t.n[p.TokenID] >= maxTicketsPerToken {
		t.pruneLocked(now)
	}
	if t.n[p.TokenID] >= maxTicketsPerToken {
		return Ticket{}, fmt.Errorf("%w: this token holds %d unused tickets, the most it may; use one, or wait %s for them to expire",
			ErrTooManyTickets, maxTicketsPerToken, t.ttl)
	}
	t.n[p.TokenID]++
	// Only what says who the person is: not a sandbox binding (whose refused those), not admin
	// (a ticket shows its person's own fleet).
	t.m[hashTicket(secret)] = ticket{p: auth.Principal{TokenID: p.TokenID, User: p.User, Scopes: []auth.Scope{auth.ScopeUser},
		ExpiresAt: p.ExpiresAt, Static: p.Static}, expires: expires}
	return Ticket{Ticket: secret, ExpiresAt: Stamp(expires)}, nil
}

// RedeemTicket uses a ticket up: it returns the principal it was made for, or ErrTicket. The
// caller still checks that the principal's token is valid (it may have been revoked since).
func (s *Service) RedeemTicket(secret string) (auth.Principal, error) {
	t := &s.tickets
	h := hashTicket(secret)
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, ok := t.m[h]
	if ok {
		delete(t.m, h)
		t.forgetLocked(tk.p.TokenID)
	}
	if !ok || !t.clock.Now().Before(tk.expires) {
		return auth.Principal{}, ErrTicket
	}
	return tk.p, nil
}

// pruneLocked forgets the expired tickets.
func (t *tickets) pruneLocked(now time.Time) {
	for k, v := range t.m {
		if !now.Before(v.expires) {
			delete(t.m, k)
			t.forgetLocked(v.p.TokenID)
		}
	}
}

func (t *tickets) forgetLocked(tok string) {
	if t.n[tok]--; t.n[tok] <= 0 {
		delete(t.n, tok)
	}
}

func hashTicket(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return string(h[:])
}
