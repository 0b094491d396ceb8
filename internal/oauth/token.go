package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

// tokenResponse is a successful token response (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// pkceVerifier is a code verifier (RFC 7636 §4.1).
var pkceVerifier = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

func invalidGrant(format string, args ...any) *oauthError {
	return badRequest("invalid_grant", format, args...)
}

// token is POST /oauth/token: the authorization_code and refresh_token grants.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	form, oe := parseForm(w, r)
	if oe != nil {
		s.writeOAuthError(w, r, oe)
		return
	}
	clientID, oe := clientOf(r, form)
	if oe != nil {
		s.writeOAuthError(w, r, oe)
		return
	}
	if err := s.knownClient(r.Context(), clientID); err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	if res := form.Get("resource"); res != "" && res != s.Resource() {
		s.writeOAuthError(w, r, badRequest("invalid_target", "The resource is not this server's; it is %s.", s.Resource()))
		return
	}
	var (
		resp tokenResponse
		err  error
	)
	switch gt := form.Get("grant_type"); gt {
	case "authorization_code":
		resp, err = s.exchangeCode(r.Context(), clientID, form)
	case "refresh_token":
		resp, err = s.refresh(r.Context(), clientID, form)
	case "":
		err = badRequest("invalid_request", "grant_type is missing.")
	default:
		err = badRequest("unsupported_grant_type", "The grant type is not offered; hangar offers authorization_code and refresh_token.")
	}
	if err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// clientOf is the client id of a token or revocation request: the client_id parameter, or
// the user of HTTP Basic authentication (with an empty password: clients are public).
func clientOf(r *http.Request, form url.Values) (string, *oauthError) {
	id := form.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok {
		if u, err := url.QueryUnescape(u); err == nil && (id == "" || id == u) {
			id = u
		} else {
			return "", badRequest("invalid_request", "The client is named twice, differently.")
		}
	}
	if id == "" {
		return "", errUnknownClient("client_id is missing.")
	}
	return id, nil
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
func (s *Server) exchangeCode(ctx context.Context, clientID string, form url.Values) (tokenResponse, error) {
	code := form.Get("code")
	if code == "" {
		return tokenResponse{}, badRequest("invalid_request", "code is missing.")
	}
	c, err := s.cfg.Store.UseOAuthCode(ctx, hash(code), s.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalidGrant("The authorization code is not one hangar issued.")
	case errors.Is(err, store.ErrUsed):
		g, gerr := s.cfg.Store.GetOAuthGrant(ctx, c.GrantID)
		if gerr == nil && g.ClientID == clientID {
			s.revokeGrant(ctx, c.GrantID)
		}
		return tokenResponse{}, invalidGrant("The authorization code was used already; the tokens issued with it are revoked.")
	case err != nil:
		return tokenResponse{}, err
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, c.GrantID)
	if err != nil {
		return tokenResponse{}, err
	}
	switch {
	case g.ClientID != clientID:
		return tokenResponse{}, invalidGrant("The authorization code was issued to another client.")
	case !s.cfg.Now().Before(c.ExpiresAt):
		return tokenResponse{}, invalidGrant("The authorization code has expired; authorize again.")
	case c.RedirectURI != "" && form.Get("redirect_uri") != c.RedirectURI: // "": the request named none
		return tokenResponse{}, invalidGrant("redirect_uri is not the one the code was issued for.")
	case !pkceVerifier.MatchString(form.Get("code_verifier")):
		return tokenResponse{}, invalidGrant("code_verifier is missing or malformed (43 to 128 of A-Z a-z 0-9 - . _ ~).")
	case !s256Matches(form.Get("code_verifier"), c.CodeChallenge):
		return tokenResponse{}, invalidGrant("code_verifier does not match the code challenge (PKCE).")
	}
	if !g.RevokedAt.IsZero() {
		return tokenResponse{}, invalidGrant("The grant was revoked.")
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
func (s *Server) refresh(ctx context.Context, clientID string, form url.Values) (tokenResponse, error) {
	rt := form.Get("refresh_token")
	if rt == "" {
		return tokenResponse{}, badRequest("invalid_request", "refresh_token is missing.")
	}
	// Whose it is is checked before it is used: another client's attempt must neither spend it
	// (its own client's next refresh would then read as a reuse and revoke the grant) nor
	// revoke anything. A grant's client never changes, so the check cannot go stale.
	grantID, err := s.cfg.Store.OAuthRefreshGrant(ctx, hash(rt))
	if errors.Is(err, store.ErrNotFound) {
		return tokenResponse{}, invalidGrant("The refresh token is not one hangar issued.")
	} else if err != nil {
		return tokenResponse{}, err
	}
	if g, err := s.cfg.Store.GetOAuthGrant(ctx, grantID); err != nil {
		return tokenResponse{}, err
	} else if g.ClientID != clientID {
		return tokenResponse{}, invalidGrant("The refresh token was issued to another client.")
	}
	ref, err := s.cfg.Store.UseOAuthRefresh(ctx, hash(rt), s.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalidGrant("The refresh token is not one hangar issued.")
	case errors.Is(err, store.ErrUsed):
		g, gerr := s.cfg.Store.GetOAuthGrant(ctx, ref.GrantID)
		if gerr == nil && !g.RevokedAt.IsZero() { // revoking a grant spends its refresh tokens
			return tokenResponse{}, invalidGrant("The grant was revoked; authorize again.")
		}
		if gerr == nil {
			s.log.Warn("an oauth refresh token was used twice; its grant is revoked", "grant", g.ID, "client", g.ClientID, "user", g.User)
			s.revokeGrant(ctx, g.ID)
		}
		return tokenResponse{}, invalidGrant("The refresh token was used already, so the grant is revoked; authorize again.")
	case err != nil:
		return tokenResponse{}, err
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, ref.GrantID)
	if err != nil {
		return tokenResponse{}, err
	}
	switch {
	case !g.RevokedAt.IsZero():
		return tokenResponse{}, invalidGrant("The grant was revoked; authorize again.")
	case !s.cfg.Now().Before(ref.ExpiresAt):
		return tokenResponse{}, invalidGrant("The refresh token has expired; authorize again.")
	}
	if sc := strings.Fields(form.Get("scope")); len(sc) > 0 {
		for _, x := range sc {
			if x != offlineAccess && !slices.Contains(g.Scopes, x) {
				return tokenResponse{}, badRequest("invalid_scope", "A scope asked for was not granted.")
			}
		}
	}
	return s.issue(ctx, g)
}

// issue makes an access token and a refresh token for g. It acts for the person who
// consented, through the token they signed in with: while that token is valid the grant's
// tokens are made by the same rules as any token it makes (no wider, no longer-lived); once it
// is revoked or expired, the grant is revoked too.
func (s *Server) issue(ctx context.Context, g store.OAuthGrant) (tokenResponse, error) {
	by, err := s.cfg.Auth.Principal(ctx, g.ConsentToken)
	if auth.Dead(err) {
		s.revokeGrant(ctx, g.ID)
		return tokenResponse{}, invalidGrant("The token the person signed in with to consent is no longer valid (%v), so the grant is revoked; authorize again.", err)
	}
	if err != nil {
		return tokenResponse{}, err
	}
	var scopes []auth.Scope
	for _, sc := range g.Scopes {
		scopes = append(scopes, auth.Scope(sc))
	}
	now := s.cfg.Now()
	c, t, err := s.cfg.Auth.PrepareToken(ctx, by, auth.NewToken{User: g.User, Scopes: scopes, Sandbox: g.Sandbox, ExpiresAt: accessExpiry(now, s.cfg.AccessTTL, by),
		Description: "OAuth: " + g.ClientName, Audience: g.Resource})
	if err != nil {
		if errors.Is(err, auth.ErrForbidden) || errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNoSandbox) {
			return tokenResponse{}, invalidGrant("The grant can no longer be honoured: %v.", err)
		}
		return tokenResponse{}, err
	}
	secret := newSecret("hgr_rt_")
	ref := &store.OAuthRefresh{Hash: hash(secret), GrantID: g.ID, ExpiresAt: now.Add(s.cfg.RefreshTTL)}
	if err := s.cfg.Store.AddOAuthToken(ctx, g.ID, t, ref); errors.Is(err, store.ErrNotFound) {
		return tokenResponse{}, invalidGrant("The grant was revoked; authorize again.")
	} else if err != nil {
		return tokenResponse{}, fmt.Errorf("store access token: %w", err)
	}
	expiresIn := int64(c.Token.ExpiresAt.Sub(now).Seconds())
	return tokenResponse{AccessToken: c.Secret, TokenType: "Bearer", ExpiresIn: expiresIn, RefreshToken: secret, Scope: strings.Join(g.Scopes, " ")}, nil
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
	ids, err := s.cfg.Store.RevokeOAuthGrant(ctx, id, s.cfg.Now())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("revoke oauth grant", "grant", id, "err", err)
	}
	for _, tid := range ids {
		s.cfg.EndToken(tid)
	}
}

// revoke is POST /oauth/revoke (RFC 7009). A refresh token revokes its whole grant; an access
// token only itself. An unknown token, or another client's, is answered 200 all the same
// (§2.2: the client cannot act on the difference, and a probe learns nothing).
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	form, oe := parseForm(w, r)
	if oe != nil {
		s.writeOAuthError(w, r, oe)
		return
	}
	clientID, oe := clientOf(r, form)
	if oe != nil {
		s.writeOAuthError(w, r, oe)
		return
	}
	tok := form.Get("token")
	if tok == "" {
		s.writeOAuthError(w, r, badRequest("invalid_request", "token is missing."))
		return
	}
	switch hint := form.Get("token_type_hint"); hint {
	case "", "access_token", "refresh_token":
	default:
		s.writeOAuthError(w, r, badRequest("unsupported_token_type", "token_type_hint is not one hangar issues (access_token, refresh_token)."))
		return
	}
	if err := s.revokeToken(r.Context(), clientID, tok); err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
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
	if err := s.cfg.Store.RevokeToken(ctx, t.ID, s.cfg.Now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.cfg.EndToken(t.ID)
	return nil
}
