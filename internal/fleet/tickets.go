package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/wire"
)

// ticketPrefix starts every stream ticket, signInPrefix every sign-in ticket, so one is
// recognisable in a log or a URL.
const (
	ticketPrefix = "hft_"
	signInPrefix = "hfs_"
)

// maxTicketsPerToken bounds the tickets one token may hold unused: asking again and again
// grows nothing.
const maxTicketsPerToken = 8

// Ticket is a ticket made for a browser: a one-time pass that lets it open its person's fleet
// stream (an EventSource cannot send an Authorization header). Tickets are kept in the store,
// only as a hash, so one asked of any replica opens the stream on any, once.
type Ticket = wire.Ticket

// IssueTicket makes a ticket for p's own fleet, usable once within TicketTTL.
func (s *Service) IssueTicket(ctx context.Context, p auth.Principal) (Ticket, error) {
	return s.issue(ctx, p, ticketPrefix, hashTicket)
}

// IssueSignIn makes a sign-in ticket for p (hangar fleet --web): the page that redeems it,
// once within TicketTTL, is signed in as p's token (RedeemSignIn). It is kept apart from a
// stream ticket, which a browser puts in a URL that servers log: its hash is of another
// domain, so neither kind is ever taken for the other. Tickets of both kinds count against the
// same bound per token.
func (s *Service) IssueSignIn(ctx context.Context, p auth.Principal) (Ticket, error) {
	if p.Page {
		return Ticket{}, fmt.Errorf("%w: a Fleet page's token cannot sign another page in; run hangar fleet --web with your own token", auth.ErrForbidden)
	}
	return s.issue(ctx, p, signInPrefix, hashSignIn)
}

// issue makes a ticket for p's own fleet, its secret starting with prefix and stored as hash
// makes it.
func (s *Service) issue(ctx context.Context, p auth.Principal, prefix string, hash func(string) string) (Ticket, error) {
	if _, err := whose(p, ""); err != nil {
		return Ticket{}, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Ticket{}, fmt.Errorf("make a ticket: %w", err)
	}
	secret := prefix + base64.RawURLEncoding.EncodeToString(b)
	now := s.cfg.Clock.Now()
	expires := now.Add(s.cfg.TicketTTL)
	// Only what says who the person is: not a sandbox binding (whose refused those), not admin
	// (a ticket shows its person's own fleet), never the token's secret (hangar has none).
	t := store.Ticket{Hash: hash(secret), TokenID: p.TokenID, User: p.User, TokenExpiresAt: p.ExpiresAt,
		Static: p.Static, ExpiresAt: expires}
	// Expired tickets no longer count, but stay until deleted: at most once a ticket's life, the
	// next ask sweeps them (a link never opened would otherwise stay for good).
	if last := s.swept.Load(); now.Sub(time.Unix(0, last)) >= s.cfg.TicketTTL && s.swept.CompareAndSwap(last, now.UnixNano()) {
		if _, err := s.cfg.Store.DeleteExpiredTickets(ctx, now); err != nil {
			s.log.Warn("fleet: sweeping expired tickets", "err", err)
		}
	}
	err := s.cfg.Store.CreateTicket(ctx, t, maxTicketsPerToken, now)
	if errors.Is(err, store.ErrLimit) {
		return Ticket{}, fmt.Errorf("%w: this token holds %d unused tickets, the most it may; use one, or wait %s for them to expire",
			ErrTooManyTickets, maxTicketsPerToken, s.cfg.TicketTTL)
	}
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{Ticket: secret, ExpiresAt: wire.Time(expires)}, nil
}

// RedeemTicket uses a ticket up: it returns the principal it was made for, or ErrTicket. The
// caller still checks that the principal's token is valid (it may have been revoked since).
func (s *Service) RedeemTicket(ctx context.Context, secret string) (auth.Principal, error) {
	t, err := s.cfg.Store.RedeemTicket(ctx, hashTicket(secret), s.cfg.Clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, ErrTicket
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return auth.Principal{TokenID: t.TokenID, User: t.User, Scopes: []auth.Scope{auth.ScopeUser},
		ExpiresAt: t.TokenExpiresAt, Static: t.Static}, nil
}

// RedeemSignIn uses a sign-in ticket up: it returns the id of the token it was made for, or
// ErrSignIn. The caller makes the page its own token from that one, if it is still valid
// (auth.Authenticator.PageToken).
func (s *Service) RedeemSignIn(ctx context.Context, secret string) (tokenID string, err error) {
	// Only what issue makes reaches the store (this route takes no token): the prefix and 32
	// bytes in base64url, 43 characters.
	if len(secret) != len(signInPrefix)+43 || !strings.HasPrefix(secret, signInPrefix) ||
		strings.Trim(secret[len(signInPrefix):], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return "", ErrSignIn
	}
	t, err := s.cfg.Store.RedeemTicket(ctx, hashSignIn(secret), s.cfg.Clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrSignIn
	}
	if err != nil {
		return "", err
	}
	return t.TokenID, nil
}

func hashTicket(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// hashSignIn hashes a sign-in ticket in a domain of its own (see IssueSignIn).
func hashSignIn(secret string) string {
	h := sha256.Sum256([]byte("hangar fleet sign-in\x00" + secret))
	return hex.EncodeToString(h[:])
}
