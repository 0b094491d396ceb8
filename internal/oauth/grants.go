package oauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

// Grant is a grant as the API shows it.
type Grant struct {
	ID         string
	ClientID   string
	ClientName string
	User       string
	Scopes     []string
	Sandbox    string
	CreatedAt  time.Time
}

// grantVisible reports whether by may see (and revoke) g: an admin any, a user-scoped token
// its user's, and a token bound to a sandbox its user's grants bound to that sandbox (as with
// tokens).
func grantVisible(by auth.Principal, g store.OAuthGrant) bool {
	switch {
	case by.IsAdmin():
		return true
	case !by.Has(auth.ScopeUser) || g.User != by.User:
		return false
	case by.Sandbox != "":
		return g.Sandbox == by.Sandbox
	}
	return true
}

// ListGrants lists the grants not revoked that by may see.
func (s *Server) ListGrants(ctx context.Context, by auth.Principal) ([]Grant, error) {
	if !by.IsAdmin() && !by.Has(auth.ScopeUser) {
		return nil, fmt.Errorf("%w: listing OAuth grants needs the admin or user scope", auth.ErrForbidden)
	}
	user := by.User
	if by.IsAdmin() {
		user = ""
	}
	gs, err := s.cfg.Store.ListOAuthGrants(ctx, user)
	if err != nil {
		return nil, err
	}
	out := []Grant{}
	for _, g := range gs {
		if grantVisible(by, g) {
			out = append(out, Grant{ID: g.ID, ClientID: g.ClientID, ClientName: g.ClientName, User: g.User, Scopes: g.Scopes, Sandbox: g.Sandbox, CreatedAt: g.CreatedAt})
		}
	}
	return out, nil
}

// RevokeGrant revokes the grant id and every token it issued, and ends their streams at once.
func (s *Server) RevokeGrant(ctx context.Context, by auth.Principal, id string) error {
	if !by.IsAdmin() && !by.Has(auth.ScopeUser) {
		return fmt.Errorf("%w: revoking OAuth grants needs the admin or user scope", auth.ErrForbidden)
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (!g.RevokedAt.IsZero() || !grantVisible(by, g))) {
		return fmt.Errorf("%w: %s", ErrNoGrant, id)
	}
	if err != nil {
		return err
	}
	ids, err := s.cfg.Store.RevokeOAuthGrant(ctx, id, s.cfg.Clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNoGrant, id)
	}
	if err != nil {
		return err
	}
	for _, tid := range ids {
		s.cfg.EndToken(tid)
	}
	return nil
}
