package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

// Tokens is what a token request yields (RFC 6749 §5.1): a bearer access token that expires
// in ExpiresIn seconds, a refresh token, and the scopes granted (space-separated).
type Tokens struct {
	Access    string
	ExpiresIn int64
	Refresh   string
	Scope     string
}

// pkceVerifier is a code verifier (RFC 7636 §4.1).
var pkceVerifier = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

func invalidGrant(format string, args ...any) *Error {
	return badRequest("invalid_grant", format, args...)
}

// Token answers a token request of clientID (the authorization_code and refresh_token
// grants) with form's parameters. A refusal is an *Error.
func (s *Server) Token(ctx context.Context, clientID string, form url.Values) (Tokens, error) {
	if err := s.knownClient(ctx, clientID); err != nil {
		return Tokens{}, err
	}
	if res := form.Get("resource"); res != "" && res != s.Resource() {
		return Tokens{}, badRequest("invalid_target", "The resource is not this server's; it is %s.", s.Resource())
	}
	switch gt := form.Get("grant_type"); gt {
	case "authorization_code":
		return s.exchangeCode(ctx, clientID, form)
	case "refresh_token":
		return s.refresh(ctx, clientID, form)
	case "":
		return Tokens{}, badRequest("invalid_request", "grant_type is missing.")
	}
	return Tokens{}, badRequest("unsupported_grant_type", "The grant type is not offered; hangar offers authorization_code and refresh_token.")
}

// knownClient checks that a client id at the token endpoint is one hangar knows: registered,
// or a metadata document URL it may fetch (the document itself was checked at authorization,
// and the code or refresh token is bound to the id).
func (s *Server) knownClient(ctx context.Context, id string) error {
	if strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://") {
		u, err := url.Parse(id)
		if err != nil {
			return errUnknownClient("The client id is not a valid URL.")
		}
		if err := s.clientIDAllowed(u); err != nil {
			return errUnknownClient("The client id URL cannot be used: %v.", err)
		}
		return nil
	}
	_, err := s.lookupClient(ctx, id)
	return err
}

// exchangeCode redeems an authorization code (RFC 6749 §4.1.3, RFC 7636 §4.6). A code used a
// second time revokes the grant the first use made (RFC 6749 §4.1.2).
func (s *Server) exchangeCode(ctx context.Context, clientID string, form url.Values) (Tokens, error) {
	code := form.Get("code")
	if code == "" {
		return Tokens{}, badRequest("invalid_request", "code is missing.")
	}
	c, err := s.cfg.Store.UseOAuthCode(ctx, hash(code), s.cfg.Clock.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Tokens{}, invalidGrant("The authorization code is not one hangar issued.")
	case errors.Is(err, store.ErrUsed):
		g, gerr := s.cfg.Store.GetOAuthGrant(ctx, c.GrantID)
		if gerr == nil && g.ClientID == clientID {
			s.revokeGrant(ctx, c.GrantID)
		}
		return Tokens{}, invalidGrant("The authorization code was used already; the tokens issued with it are revoked.")
	case err != nil:
		return Tokens{}, err
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, c.GrantID)
	if err != nil {
		return Tokens{}, err
	}
	switch {
	case g.ClientID != clientID:
		return Tokens{}, invalidGrant("The authorization code was issued to another client.")
	case !s.cfg.Clock.Now().Before(c.ExpiresAt):
		return Tokens{}, invalidGrant("The authorization code has expired; authorize again.")
	case c.RedirectURI != "" && form.Get("redirect_uri") != c.RedirectURI: // "": the request named none
		return Tokens{}, invalidGrant("redirect_uri is not the one the code was issued for.")
	case !pkceVerifier.MatchString(form.Get("code_verifier")):
		return Tokens{}, invalidGrant("code_verifier is missing or malformed (43 to 128 of A-Z a-z 0-9 - . _ ~).")
	case !s256Matches(form.Get("code_verifier"), c.CodeChallenge):
		return Tokens{}, invalidGrant("code_verifier does not match the code challenge (PKCE).")
	}
	if !g.RevokedAt.IsZero() {
		return Tokens{}, invalidGrant("The grant was revoked.")
	}
	return s.issue(ctx, g)
}

func s256Matches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// refresh redeems a refresh token for a new access token and a new refresh token. A refresh
// token used a second time revokes its whole grant: either the client or a thief holds a copy
// (OAuth 2.1 §4.3.1, refresh token rotation).
func (s *Server) refresh(ctx context.Context, clientID string, form url.Values) (Tokens, error) {
	rt := form.Get("refresh_token")
	if rt == "" {
		return Tokens{}, badRequest("invalid_request", "refresh_token is missing.")
	}
	// Whose it is is checked before it is used: another client's attempt must neither spend it
	// (its own client's next refresh would then read as a reuse and revoke the grant) nor
	// revoke anything. A grant's client never changes, so the check cannot go stale.
	grantID, err := s.cfg.Store.OAuthRefreshGrant(ctx, hash(rt))
	if errors.Is(err, store.ErrNotFound) {
		return Tokens{}, invalidGrant("The refresh token is not one hangar issued.")
	} else if err != nil {
		return Tokens{}, err
	}
	if g, err := s.cfg.Store.GetOAuthGrant(ctx, grantID); err != nil {
		return Tokens{}, err
	} else if g.ClientID != clientID {
		return Tokens{}, invalidGrant("The refresh token was issued to another client.")
	}
	ref, err := s.cfg.Store.UseOAuthRefresh(ctx, hash(rt), s.cfg.Clock.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Tokens{}, invalidGrant("The refresh token is not one hangar issued.")
	case errors.Is(err, store.ErrUsed):
		g, gerr := s.cfg.Store.GetOAuthGrant(ctx, ref.GrantID)
		if gerr == nil && !g.RevokedAt.IsZero() { // revoking a grant spends its refresh tokens
			return Tokens{}, invalidGrant("The grant was revoked; authorize again.")
		}
		if gerr == nil {
			s.log.Warn("an oauth refresh token was used twice; its grant is revoked", "grant", g.ID, "client", g.ClientID, "user", g.User)
			s.revokeGrant(ctx, g.ID)
		}
		return Tokens{}, invalidGrant("The refresh token was used already, so the grant is revoked; authorize again.")
	case err != nil:
		return Tokens{}, err
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, ref.GrantID)
	if err != nil {
		return Tokens{}, err
	}
	switch {
	case !g.RevokedAt.IsZero():
		return Tokens{}, invalidGrant("The grant was revoked; authorize again.")
	case !s.cfg.Clock.Now().Before(ref.ExpiresAt):
		return Tokens{}, invalidGrant("The refresh token has expired; authorize again.")
	}
	if sc := strings.Fields(form.Get("scope")); len(sc) > 0 {
		for _, x := range sc {
			if x != OfflineAccess && !slices.Contains(g.Scopes, x) {
				return Tokens{}, badRequest("invalid_scope", "A scope asked for was not granted.")
			}
		}
	}
	return s.issue(ctx, g)
}

// issue makes an access token and a refresh token for g. It acts for the person who
// consented, through the token they signed in with: while that token is valid the grant's
// tokens are made by the same rules as any token it makes (no wider, no longer-lived); once it
// is revoked or expired, the grant is revoked too.
func (s *Server) issue(ctx context.Context, g store.OAuthGrant) (Tokens, error) {
	by, err := s.cfg.Auth.Principal(ctx, g.ConsentToken)
	if auth.Dead(err) {
		s.revokeGrant(ctx, g.ID)
		return Tokens{}, invalidGrant("The token the person signed in with to consent is no longer valid (%v), so the grant is revoked; authorize again.", err)
	}
	if err != nil {
		return Tokens{}, err
	}
	var scopes []auth.Scope
	for _, sc := range g.Scopes {
		scopes = append(scopes, auth.Scope(sc))
	}
	now := s.cfg.Clock.Now()
	c, t, err := s.cfg.Auth.PrepareToken(ctx, by, auth.NewToken{User: g.User, Scopes: scopes, Sandbox: g.Sandbox, ExpiresAt: accessExpiry(now, s.cfg.AccessTTL, by),
		Description: "OAuth: " + g.ClientName, Audience: g.Resource})
	if err != nil {
		if errors.Is(err, auth.ErrForbidden) || errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNoSandbox) {
			return Tokens{}, invalidGrant("The grant can no longer be honoured: %v.", err)
		}
		return Tokens{}, err
	}
	secret := NewSecret("hgr_rt_")
	ref := &store.OAuthRefresh{Hash: hash(secret), GrantID: g.ID, ExpiresAt: now.Add(s.cfg.RefreshTTL)}
	if err := s.cfg.Store.AddOAuthToken(ctx, g.ID, t, ref); errors.Is(err, store.ErrNotFound) {
		return Tokens{}, invalidGrant("The grant was revoked; authorize again.")
	} else if err != nil {
		return Tokens{}, fmt.Errorf("store access token: %w", err)
	}
	expiresIn := int64(c.Token.ExpiresAt.Sub(now).Seconds())
	return Tokens{Access: c.Secret, ExpiresIn: expiresIn, Refresh: secret, Scope: strings.Join(g.Scopes, " ")}, nil
}

// accessExpiry is when an access token made now through by expires: after ttl, but no later
// than by itself (a token may not outlive the token making it), so that a grant works to its
// consent token's last moment rather than failing in its last ttl.
func accessExpiry(now time.Time, ttl time.Duration, by auth.Principal) time.Time {
	exp := now.Add(ttl)
	if !by.ExpiresAt.IsZero() && by.ExpiresAt.Before(exp) {
		exp = by.ExpiresAt
	}
	return exp
}

// revokeGrant revokes a grant and ends its tokens' streams; a failure is logged (the callers
// answer an error to the client whatever happens).
func (s *Server) revokeGrant(ctx context.Context, id string) {
	ids, err := s.cfg.Store.RevokeOAuthGrant(ctx, id, s.cfg.Clock.Now())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("revoke oauth grant", "grant", id, "err", err)
	}
	for _, tid := range ids {
		s.cfg.EndToken(tid)
	}
}

// Revoke is a revocation request of clientID (RFC 7009). A refresh token revokes its whole
// grant; an access token only itself. An unknown token, or another client's, is no error
// (§2.2: the client cannot act on the difference, and a probe learns nothing). A refusal of
// the request itself is an *Error.
func (s *Server) Revoke(ctx context.Context, clientID string, form url.Values) error {
	tok := form.Get("token")
	if tok == "" {
		return badRequest("invalid_request", "token is missing.")
	}
	switch hint := form.Get("token_type_hint"); hint {
	case "", "access_token", "refresh_token":
	default:
		return badRequest("unsupported_token_type", "token_type_hint is not one hangar issues (access_token, refresh_token).")
	}
	return s.revokeToken(ctx, clientID, tok)
}

func (s *Server) revokeToken(ctx context.Context, clientID, tok string) error {
	grantID, err := s.cfg.Store.OAuthRefreshGrant(ctx, hash(tok))
	if err == nil {
		if g, err := s.cfg.Store.GetOAuthGrant(ctx, grantID); err == nil && g.ClientID == clientID {
			s.revokeGrant(ctx, grantID)
		}
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	t, err := s.cfg.Store.TokenByHash(ctx, auth.HashSecret(tok))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	grantID, err = s.cfg.Store.OAuthTokenGrant(ctx, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // not an OAuth token: revoked through the API, not here
	} else if err != nil {
		return err
	}
	if g, err := s.cfg.Store.GetOAuthGrant(ctx, grantID); err != nil || g.ClientID != clientID {
		return nil
	}
	if err := s.cfg.Store.RevokeToken(ctx, t.ID, s.cfg.Clock.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.cfg.EndToken(t.ID)
	return nil
}
