package oauth

import (
	"context"
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

// AuthRequest is a checked authorization request (RFC 6749 §4.1.1 with PKCE and RFC 8707).
type AuthRequest struct {
	Client      Client
	RedirectURI string
	RedirectSet bool // the request named redirect_uri (then the token request must too, RFC 6749 §4.1.3)
	State       string
	Challenge   string   // PKCE S256 code challenge
	Scopes      []string // the grantable scopes asked for; always holds mcp
	Resource    string
}

// OnThisMachine reports whether the redirect goes to a loopback address while the client is
// known by a metadata document URL: any program on the person's machine could use that client
// id (draft-ietf-oauth-client-id-metadata-document, security considerations).
func (ar AuthRequest) OnThisMachine() bool {
	u, err := url.Parse(ar.RedirectURI)
	return err == nil && isLoopback(u.Hostname()) && strings.HasPrefix(ar.Client.ID, "https://")
}

// RefusedError is an authorization request whose client or redirect URI cannot be trusted
// (RFC 6749 §4.1.2.1): it is shown to the person, never sent to the redirect URI.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// pkceChallenge is an S256 code challenge: base64url of 32 bytes (RFC 7636 §4.2).
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// authParams are the parameters of an authorization request, each allowed once.
var authParams = []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "resource"}

// ParseAuthRequest checks an authorization request's parameters. A *RefusedError means the
// client or its redirect URI cannot be trusted; an *Error is any other bad request (the
// AuthRequest then names the client); any other error is hangar's own failure.
func (s *Server) ParseAuthRequest(ctx context.Context, q url.Values) (AuthRequest, error) {
	for _, k := range authParams {
		if len(q[k]) > 1 {
			return AuthRequest{}, &RefusedError{fmt.Sprintf("The parameter %s is given more than once.", k)}
		}
	}
	c, err := s.lookupClient(ctx, q.Get("client_id"))
	if err != nil {
		var oe *Error
		if !errors.As(err, &oe) {
			return AuthRequest{}, fmt.Errorf("look up oauth client: %w", err)
		}
		return AuthRequest{}, &RefusedError{"This application cannot sign in to hangar: " + oe.Description}
	}
	ar := AuthRequest{Client: c, RedirectURI: q.Get("redirect_uri"), RedirectSet: q.Get("redirect_uri") != "", State: q.Get("state")}
	switch {
	case ar.RedirectURI == "" && len(c.RedirectURIs) == 1:
		ar.RedirectURI = c.RedirectURIs[0]
	case !slices.Contains(c.RedirectURIs, ar.RedirectURI): // exact match only: no open redirect
		return AuthRequest{}, &RefusedError{fmt.Sprintf("The redirect URI %q is not one %s registered, so hangar will not send you there.", ar.RedirectURI, c.Name)}
	}
	switch {
	case q.Get("response_type") != "code":
		return ar, badRequest("unsupported_response_type", "response_type must be code.")
	case q.Get("code_challenge") == "":
		return ar, badRequest("invalid_request", "code_challenge is missing: hangar requires PKCE (S256).")
	case q.Get("code_challenge_method") != "S256":
		return ar, badRequest("invalid_request", "code_challenge_method must be S256 (plain is not accepted).")
	case !pkceChallenge.MatchString(q.Get("code_challenge")):
		return ar, badRequest("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters).")
	}
	ar.Challenge = q.Get("code_challenge")
	ar.Resource = q.Get("resource")
	if ar.Resource == "" {
		ar.Resource = s.Resource()
	} else if ar.Resource != s.Resource() {
		return ar, badRequest("invalid_target", "The resource is not this server's; it is %s.", s.Resource())
	}
	scopes, oe := requestedScopes(q.Get("scope"))
	if oe != nil {
		return ar, oe
	}
	ar.Scopes = scopes
	return ar, nil
}

// requestedScopes parses a scope parameter: grantable scopes and offline_access; none means
// mcp. mcp is always in the result, first.
func requestedScopes(param string) ([]string, *Error) {
	out := []string{string(auth.ScopeMCP)}
	for _, sc := range strings.Fields(param) {
		switch {
		case sc == OfflineAccess:
		case !slices.Contains(GrantableScopes, sc):
			return nil, badRequest("invalid_scope", "A scope asked for is not offered; hangar offers %s (and offline_access).", strings.Join(GrantableScopes, ", "))
		case !slices.Contains(out, sc):
			out = append(out, sc)
		}
	}
	return out, nil
}

// Choice is what the person chose on the consent page.
type Choice struct {
	Scopes  []string // the scopes ticked
	Sandbox string
}

// ConsentError is a consent hangar cannot grant, said to the person on the consent page so
// they can choose again. Limit: the user holds as many tokens and grants as they may (a
// conflict, which waiting does not resolve).
type ConsentError struct {
	Message string
	Limit   bool
}

func (e *ConsentError) Error() string { return e.Message }

// Consent signs the person in with token and makes what they chose for ar into a grant, and
// returns its code, which the client exchanges. A *ConsentError says what is wrong; any other
// error is hangar's own failure.
func (s *Server) Consent(ctx context.Context, ar AuthRequest, token string, choice Choice) (string, error) {
	g, problem := s.decide(ctx, ar, token, choice)
	if problem != "" {
		return "", &ConsentError{Message: problem}
	}
	code := NewSecret("hgc_")
	redirectURI := ar.RedirectURI // what the token request must repeat: "" when the request named none
	if !ar.RedirectSet {
		redirectURI = ""
	}
	c := store.OAuthCode{Hash: hash(code), RedirectURI: redirectURI, CodeChallenge: ar.Challenge, ExpiresAt: s.cfg.Clock.Now().Add(s.cfg.CodeTTL)}
	err := s.cfg.Store.CreateOAuthGrantWithin(ctx, g, c, s.cfg.Auth.MaxPerUser(), s.cfg.Clock.Now())
	if errors.Is(err, store.ErrLimit) {
		return "", &ConsentError{Message: "hangar cannot grant that: " + s.cfg.Auth.LimitFor(g.User).Error() + ".", Limit: true}
	}
	if err != nil {
		return "", fmt.Errorf("store oauth grant: %w", err)
	}
	// Each new grant sweeps the codes and refresh tokens that have expired, so that they do not
	// pile up (no timer needed: nothing expired matters until someone asks).
	if _, err := s.cfg.Store.DeleteExpiredOAuth(ctx, s.cfg.Clock.Now()); err != nil {
		s.log.Warn("delete expired oauth codes and refresh tokens", "err", err)
	}
	return code, nil
}

// SomethingWrong is what the person is told of a failure inside hangar (its cause is logged).
const SomethingWrong = "Something went wrong inside hangar; the server log has the details."

// decide signs the person in with their token and checks what they chose: the grant to make,
// or a sentence for the page saying what is wrong.
func (s *Server) decide(ctx context.Context, ar AuthRequest, token string, form Choice) (store.OAuthGrant, string) {
	p, err := s.cfg.Auth.Authenticate(ctx, strings.TrimSpace(token))
	switch {
	case errors.Is(err, auth.ErrNoToken) || auth.Dead(err):
		return store.OAuthGrant{}, "That token is not valid (" + err.Error() + "). Paste a hangar token of yours with the user scope."
	case err != nil:
		s.log.Error("sign in on the consent page", "err", err)
		return store.OAuthGrant{}, SomethingWrong
	}
	if !slices.Contains(form.Scopes, string(auth.ScopeMCP)) {
		return store.OAuthGrant{}, "The mcp scope is needed: without it the application cannot use /mcp."
	}
	var scopes []auth.Scope
	for _, sc := range form.Scopes {
		if !slices.Contains(ar.Scopes, sc) {
			return store.OAuthGrant{}, fmt.Sprintf("The scope %q was not asked for by the application.", sc)
		}
		scopes = append(scopes, auth.Scope(sc))
	}
	// A dry run of the first access token: the same rules as any token made by this one (its
	// scopes, binding and expiry), so a refusal shows here rather than at the token endpoint.
	_, t, err := s.cfg.Auth.PrepareToken(ctx, p, auth.NewToken{Scopes: scopes, Sandbox: form.Sandbox, ExpiresAt: accessExpiry(s.cfg.Clock.Now(), time.Minute, p)})
	switch {
	case errors.Is(err, auth.ErrForbidden) || errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNoSandbox):
		return store.OAuthGrant{}, "hangar cannot grant that: " + err.Error() + "."
	case err != nil:
		s.log.Error("check the grant on the consent page", "err", err)
		return store.OAuthGrant{}, SomethingWrong
	}
	return store.OAuthGrant{ID: newID("gr_"), ClientID: ar.Client.ID, ClientName: ar.Client.Name, User: t.User, Scopes: t.Scopes,
		Sandbox: t.Sandbox, Resource: ar.Resource, ConsentToken: p.TokenID, CreatedAt: s.cfg.Clock.Now()}, ""
}
