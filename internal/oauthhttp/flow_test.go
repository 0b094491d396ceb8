package oauthhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/oauth"
)

func TestMetadata(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		status, prm := decode(t, resp)
		if status != http.StatusOK || prm["resource"] != f.url+"/mcp" || !slices.Equal(prm["authorization_servers"].([]any), []any{f.url}) {
			t.Errorf("GET %s = %d %v", path, status, prm)
		}
	}
	resp, err := http.Get(f.url + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	status, as := decode(t, resp)
	if status != http.StatusOK || as["issuer"] != f.url || as["authorization_endpoint"] != f.url+"/oauth/authorize" ||
		as["token_endpoint"] != f.url+"/oauth/token" || as["registration_endpoint"] != f.url+"/oauth/register" ||
		as["revocation_endpoint"] != f.url+"/oauth/revoke" || !slices.Equal(as["code_challenge_methods_supported"].([]any), []any{"S256"}) ||
		as["client_id_metadata_document_supported"] != false || as["authorization_response_iss_parameter_supported"] != true {
		t.Errorf("authorization server metadata = %d %v", status, as)
	}
}

// TestAccessTokenIsAHangarToken: the access token is a hangar token of the person's user, with
// the scope and sandbox they chose, the client's name, an expiry and /mcp as its audience.
func TestAccessTokenIsAHangarToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.AccessTTL = 20 * time.Minute })
	client := f.register(t, "Claude Desktop", redirect)
	v, c := pkce()
	code := f.code(t, client, c, func(form url.Values) { form.Set("sandbox", "box") })
	status, out := f.exchange(t, client, code, v)
	if status != http.StatusOK || out["token_type"] != "Bearer" || out["expires_in"] != float64(1200) || out["scope"] != "mcp" || out["refresh_token"] == "" {
		t.Fatalf("token = %d %v", status, out)
	}
	p, err := f.auth.Authenticate(context.Background(), out["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if p.User != "ada" || !slices.Equal(p.Scopes, []auth.Scope{auth.ScopeMCP}) || p.Sandbox != "box" || p.Audience != f.url+"/mcp" ||
		!p.ExpiresAt.Equal(f.clock().Add(20*time.Minute)) {
		t.Errorf("principal = %+v", p)
	}
	infos, err := f.auth.ListTokens(context.Background(), p)
	if err == nil {
		t.Errorf("an mcp-only token listed tokens: %v", infos)
	}
	tok, err := f.store.TokenByID(context.Background(), p.TokenID)
	if err != nil || tok.Description != "OAuth: Claude Desktop" {
		t.Errorf("token = %+v, %v; want the client's name in its description", tok, err)
	}
}

func TestRegistrationRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, c := range []struct{ name, body, code string }{
		{"not JSON", `redirect_uris=x`, "invalid_client_metadata"},
		{"no redirect URI", `{"client_name": "x"}`, "invalid_redirect_uri"},
		{"plain http off loopback", `{"redirect_uris": ["http://app.example/cb"]}`, "invalid_redirect_uri"},
		{"a fragment", `{"redirect_uris": ["https://app.example/cb#x"]}`, "invalid_redirect_uri"},
		{"a javascript URI", `{"redirect_uris": ["javascript:alert(1)"]}`, "invalid_redirect_uri"},
		{"a relative URI", `{"redirect_uris": ["/cb"]}`, "invalid_redirect_uri"},
		{"the implicit grant", `{"redirect_uris": ["https://app.example/cb"], "grant_types": ["implicit"]}`, "invalid_client_metadata"},
		{"a token response", `{"redirect_uris": ["https://app.example/cb"], "response_types": ["token"]}`, "invalid_client_metadata"},
		{"a web application on loopback", `{"redirect_uris": ["http://127.0.0.1:9/cb"], "application_type": "web"}`, "invalid_redirect_uri"},
		{"an unknown application type", `{"redirect_uris": ["https://app.example/cb"], "application_type": "robot"}`, "invalid_client_metadata"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(f.url+"/oauth/register", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			status, out := decode(t, resp)
			wantOAuthError(t, status, out, http.StatusBadRequest, c.code)
		})
	}
	resp, err := http.Post(f.url+"/oauth/register", "application/json",
		strings.NewReader(`{"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "client_secret_basic", "logo_uri": "https://evil.example/x.png"}`))
	if err != nil {
		t.Fatal(err)
	}
	status, out := decode(t, resp)
	if status != http.StatusCreated || out["token_endpoint_auth_method"] != "none" || out["client_secret"] != nil || out["logo_uri"] != nil || out["client_name"] != "app.example" {
		t.Errorf("register = %d %v; want a public client named for its redirect host, with nothing unchecked echoed", status, out)
	}
}

// TestAuthorizeRefusals: every bad authorization request is refused on hangar's own page and
// never redirected, not even to a registered redirect URI: anyone can register one, so an
// automatic redirect would make hangar an open redirector (RFC 9700 §4.11.2). The page says
// what is wrong, with the RFC's error code.
func TestAuthorizeRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect, "https://app.example/cb")
	_, challenge := pkce()
	for _, c := range []struct {
		name   string
		change func(url.Values)
		code   string // the error code the page names, if any
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "hc_nope") }, ""},
		{"no client", func(q url.Values) { q.Del("client_id") }, ""},
		{"unregistered redirect URI", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, ""},
		{"a redirect URI's prefix", func(q url.Values) { q.Set("redirect_uri", "https://app.example/cb/../evil") }, ""},
		{"another port", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:10/cb") }, ""},
		{"no redirect URI for a client with two", func(q url.Values) { q.Del("redirect_uri") }, ""},
		{"a parameter twice", func(q url.Values) { q.Add("redirect_uri", "https://evil.example/cb") }, ""},
		{"a metadata document URL not allowed", func(q url.Values) { q.Set("client_id", "https://app.example/client.json") }, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"a malformed challenge", func(q url.Values) { q.Set("code_challenge", "short") }, "invalid_request"},
		{"the implicit flow", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"an admin scope", func(q url.Values) { q.Set("scope", "mcp admin") }, "invalid_scope"},
		{"another resource", func(q url.Values) { q.Set("resource", "https://other.example/mcp") }, "invalid_target"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := authParams(client, challenge)
			c.change(q)
			resp, body := f.page(t, browser(), q)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, "hangar cannot go on") || !strings.Contains(body, c.code) {
				t.Errorf("answer = %d, Location %q; want 400 on hangar's page naming %q\n%s", resp.StatusCode, resp.Header.Get("Location"), c.code, body)
			}
		})
	}
}

// TestNoOpenRedirect is the reviewer's repro: a client registered by anyone with an https
// redirect URI, and a bad request of it, must not send the browser there.
func TestNoOpenRedirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "", "https://evil.example/phish")
	for _, q := range []url.Values{
		{"client_id": {client}, "response_type": {"token"}},
		{"client_id": {client}, "response_type": {"code"}},
		{"client_id": {client}, "response_type": {"code"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}, "scope": {"admin"}},
	} {
		resp, _ := f.page(t, browser(), q)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("GET /oauth/authorize?%s = %d, Location %q; want 400 and no redirect", q.Encode(), resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// TestConsentPage: the page loads nothing and runs no script, cannot be framed, and its form
// is refused unless it comes from the page itself (CSRF): no grant is made.
func TestConsentPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, `<script>alert("x")</script>`, redirect)
	_, challenge := pkce()
	b := browser()
	resp, body := f.page(t, b, authParams(client, challenge))
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' http://127.0.0.1:9", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || resp.Header.Get("X-Frame-Options") != "DENY" || strings.Contains(body, "<script") || strings.Contains(body, " src=") || strings.Contains(body, "<link") {
		t.Errorf("page headers %v, body %s", resp.Header, body)
	}
	form := f.consentForm(t, b, authParams(client, challenge))
	for _, c := range []struct {
		name   string
		b      func() *http.Client
		change func(url.Values)
		header http.Header
	}{
		{"no cookie", browser, nil, nil},
		{"no csrf field", func() *http.Client { return b }, func(v url.Values) { v.Del("csrf") }, nil},
		{"another csrf value", func() *http.Client { return b }, func(v url.Values) { v.Set("csrf", "forged") }, nil},
		{"another origin", func() *http.Client { return b }, nil, http.Header{"Origin": {"https://evil.example"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := url.Values{}
			for k, vs := range form {
				v[k] = vs
			}
			if c.change != nil {
				c.change(v)
			}
			resp, _ := f.submit(t, c.b(), v, c.header)
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
				t.Errorf("forged consent = %d, Location %q; want 403", resp.StatusCode, resp.Header.Get("Location"))
			}
		})
	}
	if gs, err := f.store.ListOAuthGrants(context.Background(), ""); err != nil || len(gs) != 0 {
		t.Errorf("grants after forged consents = %v, %v; want none", gs, err)
	}
}

// TestConsentChoices: what the person enters is checked on the page (it is shown again with
// the reason), and Deny goes back to the client as access_denied.
func TestConsentChoices(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	_, challenge := pkce()
	for _, c := range []struct {
		name   string
		change func(url.Values)
		says   string
	}{
		{"a bad token", func(v url.Values) { v.Set("token", "hgr_nope") }, "That token is not valid"},
		{"without mcp", func(v url.Values) { v.Del("grant_scope") }, "The mcp scope is needed"},
		{"a scope not asked for", func(v url.Values) { v.Add("grant_scope", "jobs") }, "was not asked for"},
		{"another user&#39;s sandbox", func(v url.Values) { v.Set("sandbox", "bobs") }, "no such sandbox"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := browser()
			form := f.consentForm(t, b, authParams(client, challenge))
			c.change(form)
			resp, body := f.submit(t, b, form, nil)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.says) || !strings.Contains(body, `name="token"`) {
				t.Errorf("consent = %d; want 400 and the page again saying %q:\n%s", resp.StatusCode, c.says, body)
			}
		})
	}
	b := browser()
	form := f.consentForm(t, b, authParams(client, challenge))
	form.Set("action", "deny")
	resp, _ := f.submit(t, b, form, nil)
	if loc, _ := url.Parse(resp.Header.Get("Location")); resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "access_denied" {
		t.Errorf("deny = %d %s; want access_denied at the redirect URI", resp.StatusCode, loc)
	}
}

// TestConsentPastTokenBound: a grant counts as one of its user's live tokens, however often
// it is refreshed; once the user holds HANGAR_TOKENS_MAX_PER_USER, the consent page says so
// (409) and makes no grant, while the grants already made refresh on.
func TestConsentPastTokenBound(t *testing.T) {
	t.Parallel()
	f := newFixtureBound(t, 2, nil) // ada holds one token already
	client := f.register(t, "App", redirect)
	first := f.tokens(t, client)
	for range 2 {
		status, next := f.refresh(t, client, first["refresh_token"].(string))
		if status != http.StatusOK {
			t.Fatalf("refresh = %d %v", status, next)
		}
		first = next
	}
	b := browser()
	_, challenge := pkce()
	resp, body := f.submit(t, b, f.consentForm(t, b, authParams(client, challenge)), nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "HANGAR_TOKENS_MAX_PER_USER") {
		t.Errorf("consent past the bound = %d; want 409 and the page saying why:\n%s", resp.StatusCode, body)
	}
	if gs, err := f.store.ListOAuthGrants(context.Background(), "ada"); err != nil || len(gs) != 1 {
		t.Errorf("grants = %d, %v; want the first only", len(gs), err)
	}
}

// TestTokenRefusals: each bad redemption of a code gets the RFC's error.
func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	other := f.register(t, "Other", redirect)
	for _, c := range []struct {
		name   string
		change func(form url.Values)
		status int
		code   string
	}{
		{"another redirect URI", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9/other") }, 400, "invalid_grant"},
		{"no verifier", func(v url.Values) { v.Del("code_verifier") }, 400, "invalid_grant"},
		{"the wrong verifier", func(v url.Values) { v.Set("code_verifier", strings.Repeat("a", 43)) }, 400, "invalid_grant"},
		{"another client", func(v url.Values) { v.Set("client_id", other) }, 400, "invalid_grant"},
		{"an unknown client", func(v url.Values) { v.Set("client_id", "hc_nope") }, 401, "invalid_client"},
		{"no client", func(v url.Values) { v.Del("client_id") }, 401, "invalid_client"},
		{"an unknown code", func(v url.Values) { v.Set("code", "hgc_nope") }, 400, "invalid_grant"},
		{"another resource", func(v url.Values) { v.Set("resource", "https://other.example/mcp") }, 400, "invalid_target"},
		{"the password grant", func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
		{"no grant type", func(v url.Values) { v.Del("grant_type") }, 400, "invalid_request"},
		{"a parameter twice", func(v url.Values) { v.Add("code", "hgc_other") }, 400, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, ch := pkce()
			form := url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {f.code(t, client, ch, nil)},
				"redirect_uri": {redirect}, "code_verifier": {v}}
			c.change(form)
			status, out := f.post(t, "/oauth/token", form)
			wantOAuthError(t, status, out, c.status, c.code)
		})
	}
}

func TestExpiredCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.CodeTTL = time.Minute })
	client := f.register(t, "App", redirect)
	v, ch := pkce()
	code := f.code(t, client, ch, nil)
	f.advance(time.Minute)
	status, out := f.exchange(t, client, code, v)
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
}

// TestCodeReuseRevokesItsTokens: a code redeemed twice is refused the second time, and the
// tokens the first redemption issued are revoked (RFC 6749 §4.1.2).
func TestCodeReuseRevokesItsTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	v, ch := pkce()
	code := f.code(t, client, ch, nil)
	status, first := f.exchange(t, client, code, v)
	if status != http.StatusOK {
		t.Fatalf("first exchange = %d %v", status, first)
	}
	status, out := f.exchange(t, client, code, v)
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if _, err := f.auth.Authenticate(context.Background(), first["access_token"].(string)); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the first access token after the code's reuse: %v, want revoked", err)
	}
	status, out = f.refresh(t, client, first["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if len(f.endedTokens()) != 1 {
		t.Errorf("streams ended for %v, want the one access token", f.endedTokens())
	}
}

// TestRefreshRotation: each refresh gives a new access token and a new refresh token; the
// old refresh token used again revokes the whole grant (every access token, the newest refresh
// token), and ends the tokens' streams.
func TestRefreshRotation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	first := f.tokens(t, client)
	status, second := f.refresh(t, client, first["refresh_token"].(string))
	if status != http.StatusOK || second["access_token"] == first["access_token"] || second["refresh_token"] == first["refresh_token"] {
		t.Fatalf("refresh = %d %v", status, second)
	}
	if status, out := f.refresh(t, "hc_nope", second["refresh_token"].(string)); status != http.StatusUnauthorized || out["error"] != "invalid_client" {
		t.Errorf("refresh by an unknown client = %d %v", status, out)
	}
	status, out := f.refresh(t, client, first["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	for _, tok := range []any{first["access_token"], second["access_token"]} {
		if _, err := f.auth.Authenticate(context.Background(), tok.(string)); !errors.Is(err, auth.ErrRevoked) {
			t.Errorf("an access token of the grant after a refresh token's reuse: %v, want revoked", err)
		}
	}
	status, out = f.refresh(t, client, second["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if len(f.endedTokens()) != 2 {
		t.Errorf("streams ended for %v, want both access tokens", f.endedTokens())
	}
}

// TestRefreshByAnotherClient: a refresh token sent by another client than its own is refused
// (invalid_grant) without being used up, so its own client's next refresh works and is not
// taken for a reuse that revokes the grant.
func TestRefreshByAnotherClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client, other := f.register(t, "App", redirect), f.register(t, "Other", redirect)
	first := f.tokens(t, client)
	rt := first["refresh_token"].(string)
	status, out := f.refresh(t, other, rt)
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if d, _ := out["error_description"].(string); !strings.Contains(d, "another client") {
		t.Errorf("refresh by another client: %q, want it to say so", d)
	}
	status, next := f.refresh(t, client, rt)
	if status != http.StatusOK {
		t.Fatalf("its own client's refresh after another client tried it = %d %v, want 200", status, next)
	}
	if _, err := f.auth.Authenticate(context.Background(), first["access_token"].(string)); err != nil {
		t.Errorf("the grant's first access token: %v, want it alive", err)
	}
	if ended := f.endedTokens(); len(ended) != 0 {
		t.Errorf("streams ended for %v, want none", ended)
	}
}

func TestRefreshExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.RefreshTTL = time.Hour })
	client := f.register(t, "App", redirect)
	first := f.tokens(t, client)
	f.advance(time.Hour)
	status, out := f.refresh(t, client, first["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
}

// TestGrantLastsToItsConsentTokensExpiry: access tokens of a grant whose consent token expires
// sooner than AccessTTL expire with it, rather than being refused.
func TestGrantLastsToItsConsentTokensExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.AccessTTL = time.Hour })
	ctx := context.Background()
	ada, err := f.auth.Authenticate(ctx, f.ada)
	if err != nil {
		t.Fatal(err)
	}
	short, err := f.auth.CreateToken(ctx, ada, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, ExpiresAt: f.clock().Add(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	client := f.register(t, "App", redirect)
	v, c := pkce()
	status, out := f.exchange(t, client, f.code(t, client, c, func(form url.Values) { form.Set("token", short.Secret) }), v)
	if status != http.StatusOK || out["expires_in"] != float64(30*60) {
		t.Fatalf("token with a consent token expiring in 30 minutes = %d %v; want 200, expiring in 1800s", status, out)
	}
	f.advance(29 * time.Minute)
	status, out = f.refresh(t, client, out["refresh_token"].(string))
	if status != http.StatusOK || out["expires_in"] != float64(60) {
		t.Errorf("refresh a minute before the consent token expires = %d %v; want 200, expiring in 60s", status, out)
	}
}

// TestConsentTokenRevokedEndsGrant: a grant lives no longer than the token the person signed
// in with: once it is revoked, a refresh is refused and the grant revoked.
func TestConsentTokenRevokedEndsGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	first := f.tokens(t, client)
	if err := f.store.RevokeToken(context.Background(), f.adaID, f.clock()); err != nil {
		t.Fatal(err)
	}
	status, out := f.refresh(t, client, first["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if _, err := f.auth.Authenticate(context.Background(), first["access_token"].(string)); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the grant's access token: %v, want revoked", err)
	}
}

// TestRevocationEndpoint (RFC 7009): an access token revokes itself, a refresh token its whole
// grant; an unknown token, or another client's, is answered 200 and changes nothing.
func TestRevocationEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	other := f.register(t, "Other", redirect)
	ctx := context.Background()
	revoke := func(clientID, token, hint string) (int, map[string]any) {
		return f.post(t, "/oauth/revoke", url.Values{"client_id": {clientID}, "token": {token}, "token_type_hint": {hint}})
	}
	tok := f.tokens(t, client)
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	for _, c := range []struct{ client, token string }{{client, "hgr_unknown"}, {other, access}, {other, refresh}} {
		if status, out := revoke(c.client, c.token, ""); status != http.StatusOK {
			t.Errorf("revoke %s as %s = %d %v, want 200", c.token[:8], c.client, status, out)
		}
	}
	if _, err := f.auth.Authenticate(ctx, access); err != nil {
		t.Fatalf("another client revoked the access token: %v", err)
	}
	status, out := revoke(client, access, "weird")
	wantOAuthError(t, status, out, http.StatusBadRequest, "unsupported_token_type")
	if status, out := revoke(client, access, "access_token"); status != http.StatusOK {
		t.Fatalf("revoke access token = %d %v", status, out)
	}
	if _, err := f.auth.Authenticate(ctx, access); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the access token after its revocation: %v", err)
	}
	status, next := f.refresh(t, client, refresh)
	if status != http.StatusOK {
		t.Fatalf("refresh after revoking an access token = %d %v; want the grant alive", status, next)
	}
	if status, out := revoke(client, next["refresh_token"].(string), "refresh_token"); status != http.StatusOK {
		t.Fatalf("revoke refresh token = %d %v", status, out)
	}
	if _, err := f.auth.Authenticate(ctx, next["access_token"].(string)); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the grant's access token after revoking its refresh token: %v", err)
	}
	if gs, _ := f.store.ListOAuthGrants(ctx, ""); len(gs) != 0 {
		t.Errorf("grants after revoking the refresh token: %v", gs)
	}
	status, out = f.refresh(t, client, next["refresh_token"].(string))
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant")
	if d := out["error_description"].(string); !strings.Contains(d, "The grant was revoked") {
		t.Errorf("refresh with the revoked refresh token: %q, want it to say the grant was revoked", d)
	}
}

// TestClientIDMetadataDocument: a client id that is an https URL on an allowed host is fetched
// and must describe itself; anything else is refused on hangar's page. The documents are
// served over https on loopback (httptest's TLS server, whose client hangar is given): hangar
// never fetches a client id over plain http, not even in tests.
func TestClientIDMetadataDocument(t *testing.T) {
	t.Parallel()
	docs := map[string]string{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	doc := func(path, clientID string, extra string) string {
		docs[path] = `{"client_id": "` + clientID + `", "client_name": "Doc", "redirect_uris": ["` + redirect + `"]` + extra + `}`
		return srv.URL + path
	}
	good := doc("/good.json", srv.URL+"/good.json", "")
	mismatch := doc("/mismatch.json", srv.URL+"/other.json", "")
	secret := doc("/secret.json", srv.URL+"/secret.json", `, "token_endpoint_auth_method": "private_key_jwt"`)
	badRedirect := srv.URL + "/bad-redirect.json"
	docs["/bad-redirect.json"] = `{"client_id": "` + badRedirect + `", "redirect_uris": ["http://app.example/cb"]}`
	docs["/not-json.json"] = `<html>`
	f := newFixture(t, func(c *oauth.Config) {
		c.ClientIDHosts, c.HTTPClient, c.ClientIDAddrAllowed = []string{host}, srv.Client(), allowLoopback
	})
	_, challenge := pkce()
	for _, c := range []struct {
		name, clientID string
		status         int
	}{
		{"a good document", good, http.StatusOK},
		{"a document naming another client id", mismatch, http.StatusBadRequest},
		{"a confidential client", secret, http.StatusBadRequest},
		{"a redirect URI off loopback over http", badRedirect, http.StatusBadRequest},
		{"not JSON", srv.URL + "/not-json.json", http.StatusBadRequest},
		{"no document", srv.URL + "/none.json", http.StatusBadRequest},
		{"plain http", "http://" + host + "/good.json", http.StatusBadRequest},
		{"the root", srv.URL + "/", http.StatusBadRequest},
		{"dot segments", srv.URL + "/x/../good.json", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := f.page(t, browser(), authParams(c.clientID, challenge))
			if resp.StatusCode != c.status || resp.Header.Get("Location") != "" {
				t.Errorf("consent page = %d, Location %q; want %d\n%s", resp.StatusCode, resp.Header.Get("Location"), c.status, body)
			}
		})
	}
	if _, body := f.page(t, browser(), authParams(good, challenge)); !strings.Contains(body, "on your own computer") {
		t.Error("the consent page of a metadata-document client redirecting to loopback does not warn that any program could use its client id")
	}
	// The whole flow with the document's client.
	status, out := f.exchange(t, good, f.code(t, good, challenge, nil), "")
	wantOAuthError(t, status, out, http.StatusBadRequest, "invalid_grant") // no verifier: refused
	v, ch := pkce()
	if status, out := f.exchange(t, good, f.code(t, good, ch, nil), v); status != http.StatusOK {
		t.Errorf("token for the document's client = %d %v", status, out)
	}
	if status, out := f.exchange(t, "https://elsewhere.example/client.json", "hgc_x", v); status != http.StatusUnauthorized || out["error"] != "invalid_client" {
		t.Errorf("token for a client id URL not allowed = %d %v", status, out)
	}
}

func allowLoopback(ip netip.Addr) bool { return ip.IsLoopback() }

// docServer serves one good Client ID Metadata Document over https on loopback, at /good.json,
// and counts the requests it gets.
func docServer(t *testing.T) (srv *httptest.Server, good string, fetches *atomic.Int32) {
	fetches = new(atomic.Int32)
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if r.URL.Path != "/good.json" {
			http.Error(w, "secret internal page", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"client_id": "`+srv.URL+`/good.json", "client_name": "Doc", "redirect_uris": ["`+redirect+`"]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, srv.URL + "/good.json", fetches
}

// TestClientIDDocumentNotInternal: by default hangar does not connect to a loopback (or
// private, link-local...) address to fetch a client's metadata document, even from an allowed
// host; and what the page says of a failed fetch does not tell what the network answered.
func TestClientIDDocumentNotInternal(t *testing.T) {
	t.Parallel()
	srv, good, fetches := docServer(t)
	f := newFixture(t, func(c *oauth.Config) { c.ClientIDHosts, c.HTTPClient = []string{"*"}, srv.Client() })
	_, challenge := pkce()
	resp, body := f.page(t, browser(), authParams(good, challenge))
	if resp.StatusCode != http.StatusBadRequest || fetches.Load() != 0 {
		t.Errorf("consent page of a client id on loopback = %d after %d fetches; want 400 and no fetch\n%s", resp.StatusCode, fetches.Load(), body)
	}
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	if !strings.Contains(body, "could not be fetched") || strings.Contains(body, "refuse") || strings.Count(body, port) > 1 {
		t.Errorf("the page tells more than that the document could not be fetched:\n%s", body)
	}
	for _, c := range []struct {
		ip   string
		want bool
	}{{"127.0.0.1", false}, {"10.1.2.3", false}, {"169.254.169.254", false}, {"0.0.0.0", false}, {"100.64.0.1", false},
		{"::1", false}, {"fe80::1", false}, {"fd00::1", false}, {"::ffff:192.168.0.1", false}, {"64:ff9b::a00:1", false},
		{"93.184.215.14", true}, {"2606:4700::1111", true}} {
		if got := oauth.PublicAddr(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("PublicAddr(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
}

// TestClientIDDocumentErrorsSayLittle: a document answering an error is refused with the same
// sentence as any other failure, not its status or body.
func TestClientIDDocumentErrorsSayLittle(t *testing.T) {
	t.Parallel()
	srv, _, _ := docServer(t)
	f := newFixture(t, func(c *oauth.Config) {
		c.ClientIDHosts, c.HTTPClient, c.ClientIDAddrAllowed = []string{"*"}, srv.Client(), allowLoopback
	})
	_, challenge := pkce()
	resp, body := f.page(t, browser(), authParams(srv.URL+"/internal", challenge))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "could not be fetched") || strings.Contains(body, "418") || strings.Contains(body, "text/plain") {
		t.Errorf("consent page = %d; want 400 saying only that the document could not be fetched\n%s", resp.StatusCode, body)
	}
}

// TestClientIDDocumentCached: a document is fetched once for a while, not on every page load.
func TestClientIDDocumentCached(t *testing.T) {
	t.Parallel()
	srv, good, fetches := docServer(t)
	f := newFixture(t, func(c *oauth.Config) {
		c.ClientIDHosts, c.HTTPClient, c.ClientIDAddrAllowed = []string{"*"}, srv.Client(), allowLoopback
	})
	_, challenge := pkce()
	for range 3 {
		if resp, body := f.page(t, browser(), authParams(good, challenge)); resp.StatusCode != http.StatusOK {
			t.Fatalf("consent page = %d\n%s", resp.StatusCode, body)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("three consent pages fetched the document %d times, want 1", n)
	}
	f.advance(5 * time.Minute)
	f.page(t, browser(), authParams(good, challenge))
	if n := fetches.Load(); n != 2 {
		t.Errorf("after 5 minutes, fetches = %d, want 2 (fetched again)", n)
	}
}

// TestExpiredAccessTokenLivesWithItsGrant: an expired access token is refused for new requests
// (Authenticate, and Check, which a request checks an earlier principal with), but what it
// opened (checked with auth.Recheck: streams, MCP sessions) goes on while its grant stands, and
// ends once the grant, or the token the person consented with, is revoked.
func TestExpiredAccessTokenLivesWithItsGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.AccessTTL = time.Minute })
	ctx := context.Background()
	client := f.register(t, "App", redirect)
	first, second := f.tokens(t, client), f.tokens(t, client)
	p1, err := f.auth.Authenticate(ctx, first["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.auth.Authenticate(ctx, second["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute)
	if _, err := f.auth.Authenticate(ctx, first["access_token"].(string)); !errors.Is(err, auth.ErrExpired) {
		t.Fatalf("Authenticate(expired access token) = %v, want ErrExpired", err)
	}
	if err := f.auth.Check(ctx, p1); !errors.Is(err, auth.ErrExpired) {
		t.Fatalf("Check(expired access token of a live grant) = %v, want ErrExpired (a new request)", err)
	}
	if err := f.auth.Recheck(ctx, p1); err != nil {
		t.Fatalf("Recheck(expired access token of a live grant) = %v, want nil", err)
	}
	if err := f.store.RevokeToken(ctx, f.adaID, f.clock()); err != nil { // the consent token
		t.Fatal(err)
	}
	for _, p := range []auth.Principal{p1, p2} {
		if err := f.auth.Recheck(ctx, p); !errors.Is(err, auth.ErrRevoked) {
			t.Errorf("Recheck after the consent token's revocation = %v, want ErrRevoked", err)
		}
	}
}

// TestGrantEndsWithItsRefreshTokens: once a grant has no refresh token left that is unused and
// unexpired, its client can get no new access token, so what its expired ones opened ends.
func TestGrantEndsWithItsRefreshTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) { c.AccessTTL, c.RefreshTTL = time.Minute, time.Hour })
	ctx := context.Background()
	client := f.register(t, "App", redirect)
	p, err := f.auth.Authenticate(ctx, f.tokens(t, client)["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	f.advance(30 * time.Minute)
	if err := f.auth.Recheck(ctx, p); err != nil {
		t.Fatalf("Recheck with a refresh token left = %v, want nil", err)
	}
	f.advance(30 * time.Minute)
	if err := f.auth.Recheck(ctx, p); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Recheck once the refresh token expired = %v, want ErrRevoked", err)
	}
}

// TestRevokingConsentTokenEndsGrant: revoking the token the person consented with (as the API
// does) revokes the grant at once, with its unexpired access tokens, and says which they are so
// that their streams end.
func TestRevokingConsentTokenEndsGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	client := f.register(t, "App", redirect)
	tok := f.tokens(t, client)
	access, err := f.auth.Authenticate(ctx, tok["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ada, err := f.auth.Authenticate(ctx, f.ada)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := f.auth.RevokeToken(ctx, ada, f.adaID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ended, access.TokenID) {
		t.Errorf("RevokeToken(consent token) ended %v, want the grant's access token %s", ended, access.TokenID)
	}
	if _, err := f.auth.Authenticate(ctx, tok["access_token"].(string)); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the grant's unexpired access token after its consent token's revocation: %v, want revoked", err)
	}
	if gs, _ := f.store.ListOAuthGrants(ctx, ""); len(gs) != 0 {
		t.Errorf("grants after revoking their consent token: %v", gs)
	}
}

// TestRedirectURIOmitted: a client with one redirect URI may leave it out of the request (it is
// then used), and then out of the token request too (RFC 6749 §4.1.3).
func TestRedirectURIOmitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	v, ch := pkce()
	b := browser()
	q := authParams(client, ch)
	q.Del("redirect_uri")
	form := f.consentForm(t, b, q)
	resp, body := f.submit(t, b, form, nil)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), redirect+"?") {
		t.Fatalf("consent = %d %s %s", resp.StatusCode, loc, body)
	}
	status, out := f.post(t, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {client},
		"code": {loc.Query().Get("code")}, "code_verifier": {v}})
	if status != http.StatusOK {
		t.Errorf("token without redirect_uri = %d %v", status, out)
	}
}

// TestTwoConsentPagesAtOnce: a browser with two consent pages open (two clients, two tabs) can
// send either form: the CSRF cookie is one per browser.
func TestTwoConsentPagesAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a, b := f.register(t, "A", redirect), f.register(t, "B", redirect)
	_, ch := pkce()
	br := browser()
	formA := f.consentForm(t, br, authParams(a, ch))
	formB := f.consentForm(t, br, authParams(b, ch))
	for name, form := range map[string]url.Values{"first": formA, "second": formB} {
		if resp, body := f.submit(t, br, form, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("the %s page's form = %d %s", name, resp.StatusCode, body)
		}
	}
}

// TestCORS: a browser-based client (the MCP Inspector) may call registration, the token and
// revocation endpoints from another origin; the consent page gives no other origin anything.
func TestCORS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, path := range []string{"/oauth/register", "/oauth/token", "/oauth/revoke"} {
		req, _ := http.NewRequest("OPTIONS", f.url+path, nil)
		req.Header.Set("Origin", "https://inspector.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("OPTIONS %s = %d, Access-Control-Allow-Origin %q", path, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		resp, err = http.Post(f.url+path, "application/x-www-form-urlencoded", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("POST %s: no Access-Control-Allow-Origin", path)
		}
	}
	_, challenge := pkce()
	resp, _ := f.page(t, browser(), authParams(f.register(t, "App", redirect), challenge))
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("the consent page allows other origins")
	}
}

// nqschar is error_description's character set (RFC 6749 §5.2).
var nqschar = regexp.MustCompile(`^[\x20\x21\x23-\x5B\x5D-\x7E]*$`)

// TestErrorDescriptions: no error_description holds a character outside its set (a " above
// all) nor repeats what the request said.
func TestErrorDescriptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	client := f.register(t, "App", redirect)
	const evil = `EVIL"\`
	check := func(what string, status int, out map[string]any) {
		t.Helper()
		d, _ := out["error_description"].(string)
		if status < 400 || d == "" || !nqschar.MatchString(d) || strings.Contains(d, "EVIL") {
			t.Errorf("%s = %d %v; want an error whose description is in NQSCHAR and does not echo the request", what, status, out)
		}
	}
	for _, body := range []string{
		`{"redirect_uris": ["https://app\"EVIL.example/cb"]}`,
		`{"redirect_uris": ["javascript:EVIL"]}`,
		`{"redirect_uris": ["http://EVIL.example/cb"]}`,
		`{"redirect_uris": ["https://app.example/cb"], "application_type": "EVIL\""}`,
		`{"redirect_uris": ["https://app.example/cb"], "grant_types": ["EVIL\""]}`,
		`{"redirect_uris": ["https://app.example/cb"], "response_types": ["EVIL\""]}`,
		`{"redirect_uris": ["https://app.example/cb"], "application_type": "web", "EVIL": 1, "redirect_uris": ["http://127.0.0.1/EVIL"]}`,
		`EVIL"`,
	} {
		resp, err := http.Post(f.url+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		status, out := decode(t, resp)
		check("register "+body, status, out)
	}
	for _, form := range []url.Values{
		{"client_id": {evil}, "grant_type": {"authorization_code"}},
		{"client_id": {"https://" + evil + ".example/c.json"}, "grant_type": {"authorization_code"}},
		{"client_id": {client}, "grant_type": {evil}},
		{"client_id": {client}, "grant_type": {"authorization_code"}, "resource": {"https://" + evil}},
		{"client_id": {client}, "grant_type": {"authorization_code"}, evil: {"1", "2"}},
	} {
		status, out := f.post(t, "/oauth/token", form)
		check("token "+form.Encode(), status, out)
	}
	status, out := f.post(t, "/oauth/revoke", url.Values{"client_id": {client}, "token": {"x"}, "token_type_hint": {evil}})
	check("revoke with a bad hint", status, out)
	status, out = f.refresh(t, client, f.tokens(t, client)["refresh_token"].(string))
	if status != http.StatusOK {
		t.Fatalf("refresh = %d %v", status, out)
	}
	status, out = f.post(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {out["refresh_token"].(string)}, "scope": {"mcp " + evil}})
	check("refresh with a scope not granted", status, out)
}

// TestRedirectURIHosts: a redirect URI's host must be a DNS name or an IP address.
func TestRedirectURIHosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for uri, ok := range map[string]bool{
		"https://app.example/cb": true, "https://app.example.:8443/cb": true, "https://[2001:db8::1]/cb": true, "http://127.0.0.1:9/cb": true,
		"https://a;b.example/cb": false, "https://a,b.example/cb": false, "https://a'b.example/cb": false, "https://a_b.example/cb": false,
		"https://-app.example/cb": false, "https://app..example/cb": false, "https://a%20b.example/cb": false, "https://[fe80::1%25eth0]/cb": false,
	} {
		body, _ := json.Marshal(map[string]any{"redirect_uris": []string{uri}})
		resp, err := http.Post(f.url+"/oauth/register", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		status, out := decode(t, resp)
		if (status == http.StatusCreated) != ok {
			t.Errorf("register %s = %d %v; want accepted %v", uri, status, out, ok)
		}
	}
}

// failingStore fails every token lookup by secret, with a cause that must stay in the log.
type failingStore struct{ store.Store }

func (failingStore) TokenByHash(context.Context, string) (store.Token, error) {
	return store.Token{}, errors.New("pq: relation tokens_SECRETDETAIL does not exist")
}

// TestConsentPageHidesStoreErrors: a failure inside hangar while signing the person in is
// shown as a generic sentence; its cause goes to the log only.
func TestConsentPageHidesStoreErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *oauth.Config) {
		a, err := auth.New(context.Background(), auth.Config{Store: failingStore{c.Store}, Clock: c.Clock})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = a
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	client := f.register(t, "App", redirect)
	_, challenge := pkce()
	b := browser()
	resp, body := f.submit(t, b, f.consentForm(t, b, authParams(client, challenge)), nil)
	if resp.StatusCode == http.StatusSeeOther || strings.Contains(body, "SECRETDETAIL") || !strings.Contains(body, "Something went wrong inside hangar") {
		t.Errorf("consent with a failing store = %d; want the page with a generic sentence, not the cause\n%s", resp.StatusCode, body)
	}
}
