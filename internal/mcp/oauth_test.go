package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/hangar-dev/hangar/internal/oauth"
)

// redirectURI is the test client's redirect URI: nothing listens there, since person reads the
// redirect itself.
const redirectURI = "http://127.0.0.1:9/callback"

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// consentPage opens an authorization URL as a browser would and returns the consent form's
// hidden fields and the client (with its cookie) to send the form with.
func consentPage(authURL string) (url.Values, *http.Client, error) {
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(authURL)
	if err != nil {
		return nil, nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("consent page: %d %s", resp.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return form, browser, nil
}

// consentAnswer is where hangar sent the person after the consent form.
func consentAnswer(browser *http.Client, endpoint string, form url.Values) (*url.URL, error) {
	resp, err := browser.PostForm(endpoint, form)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("consent: %d %s", resp.StatusCode, body)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// person plays the person at the consent page: signs in with token, keeps the scope mcp,
// binds the grant to sandbox, allows, and hands the client what came back.
func person(token, sandbox string) sdkauth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
		form, browser, err := consentPage(args.URL)
		if err != nil {
			return nil, err
		}
		form.Set("token", token)
		form.Set("grant_scope", "mcp")
		form.Set("sandbox", sandbox)
		form.Set("action", "allow")
		u, _ := url.Parse(args.URL)
		back, err := consentAnswer(browser, u.Scheme+"://"+u.Host+u.Path, form)
		if err != nil {
			return nil, err
		}
		q := back.Query()
		if q.Get("error") != "" {
			return nil, errors.New(q.Get("error") + ": " + q.Get("error_description"))
		}
		return &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// TestOAuthClientStreamsUntilGrantRevoked is the end to end: go-sdk's MCP client,
// knowing only hangar's /mcp URL, gets a 401, finds the metadata, registers (dynamically, or
// by its Client ID Metadata Document served over https on loopback), sends the person through
// consent, gets a token, and streams an exec with progress; revoking the grant through the
// API ends the stream, and the token is refused from then on.
func TestOAuthClientStreamsUntilGrantRevoked(t *testing.T) {
	t.Parallel()
	var docURL string
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "Doc Client", "redirect_uris": []string{redirectURI},
			"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	docHost := strings.TrimPrefix(doc.URL, "https://")
	e := newEnv(t, envOptions{oauth: func(c *oauth.Config) {
		// The document is served on loopback, which hangar refuses to fetch from by default.
		c.ClientIDHosts, c.HTTPClient, c.ClientIDAddrAllowed = []string{docHost}, doc.Client(), func(ip netip.Addr) bool { return ip.IsLoopback() }
	}})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	// What a client that knows only the URL meets first: a 401 naming the metadata.
	resp, err := e.http.Post(e.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := `Bearer resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`; resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("POST /mcp without a token = %d, WWW-Authenticate %q; want 401, %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	for _, c := range []struct {
		name, era, client string
		registration      func(*sdkauth.AuthorizationCodeHandlerConfig)
	}{
		{"dynamic registration", eras[0], "Dynamic Client", func(cfg *sdkauth.AuthorizationCodeHandlerConfig) {
			cfg.DynamicClientRegistrationConfig = &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName: "Dynamic Client", RedirectURIs: []string{redirectURI}, TokenEndpointAuthMethod: "none",
				GrantTypes: []string{"authorization_code", "refresh_token"}}}
		}},
		{"metadata document", eras[1], "Doc Client", func(cfg *sdkauth.AuthorizationCodeHandlerConfig) {
			cfg.ClientIDMetadataDocumentConfig = &sdkauth.ClientIDMetadataDocumentConfig{URL: docURL}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &sdkauth.AuthorizationCodeHandlerConfig{RedirectURL: redirectURI, AuthorizationCodeFetcher: person(ada, "box"), Client: e.http}
			c.registration(cfg)
			h, err := sdkauth.NewAuthorizationCodeHandler(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cl := e.connectWith(t, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: e.http, OAuthHandler: h, MaxRetries: -1}, c.era)
			ts, err := h.TokenSource(context.Background())
			if err != nil || ts == nil {
				t.Fatalf("token source after connecting: %v, %v", ts, err)
			}
			tok, err := ts.Token()
			if err != nil || tok.RefreshToken == "" {
				t.Fatalf("token = %+v, %v; want an access and a refresh token", tok, err)
			}

			if id := cl.session.ID(); id != "" {
				refreshedGoesOn(t, e, id, onlyGrant(t, e, ada, c.client)["client_id"].(string), tok.RefreshToken)
			}

			pidFile := filepath.Join(t.TempDir(), "pid")
			k := cl.start(map[string]any{"sandbox": "box", "command": sleeper(pidFile)}, true)
			if p := cl.nextProgress(t, k); p.message != "started\n" {
				t.Fatalf("progress %+v", p)
			}
			pid := pidOf(t, pidFile)
			defer syscall.Kill(pid, syscall.SIGKILL)

			grant := onlyGrant(t, e, ada, c.client)
			if grant["sandbox"] != "box" || fmt.Sprint(grant["scopes"]) != "[mcp]" || grant["user"] != "ada" {
				t.Errorf("grant = %v, want ada's, bound to box, scope mcp", grant)
			}
			if status, out := e.do(t, "DELETE", "/api/oauth/grants/"+grant["id"].(string), ada, ""); status != http.StatusNoContent {
				t.Fatalf("revoke grant = %d %v", status, out)
			}
			if out := structured(t, k.wait(t)); out["closed"] != "revoked" {
				t.Errorf("result = %v, want closed: revoked", out)
			}
			waitDead(t, pid)
			if status, _ := e.do(t, "GET", "/api/whoami", tok.AccessToken, ""); status != http.StatusUnauthorized {
				t.Errorf("the revoked access token: %d, want 401", status)
			}
		})
	}
}

// onlyGrant returns the one grant of user's whose client is named client.
func onlyGrant(t *testing.T, e *env, token, client string) map[string]any {
	t.Helper()
	status, out := e.do(t, "GET", "/api/oauth/grants", token, "")
	if status != http.StatusOK {
		t.Fatalf("GET /api/oauth/grants = %d %v", status, out)
	}
	var found map[string]any
	for _, g := range out["grants"].([]any) {
		if g := g.(map[string]any); g["client_name"] == client {
			if found != nil {
				t.Fatalf("two grants of %s: %v", client, out)
			}
			found = g
		}
	}
	if found == nil {
		t.Fatalf("no grant of %s in %v", client, out)
	}
	return found
}

// refreshedGoesOn refreshes the client's token by hand and checks that a request in its
// 2025-era session with the new token is its session's still: the session belongs to the
// grant, not to the access token that opened it.
func refreshedGoesOn(t *testing.T, e *env, sessionID, clientID, refreshToken string) {
	t.Helper()
	access := refresh(t, e, clientID, refreshToken)
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", eras[0])
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a ping in the session with the refreshed token = %d %s, want 200", resp.StatusCode, body)
	}
}

// refresh refreshes a client's token by hand and returns the new access token.
func refresh(t *testing.T, e *env, clientID, refreshToken string) string {
	t.Helper()
	resp, err := e.http.PostForm(e.url+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {refreshToken}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("refresh = %d", resp.StatusCode)
	}
	return tok.AccessToken
}

// TestRefreshedGrantSharesProcessLimit: the access tokens one OAuth grant issued (a new one at
// each refresh) share one HANGAR_BACKGROUND_MAX_PER_TOKEN count: a refreshed token gets no
// fresh allowance of background processes.
func TestRefreshedGrantSharesProcessLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxProcsPerToken: 1, oauth: func(*oauth.Config) {}})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	cfg := &sdkauth.AuthorizationCodeHandlerConfig{RedirectURL: redirectURI, AuthorizationCodeFetcher: person(ada, "box"), Client: e.http,
		DynamicClientRegistrationConfig: &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Greedy Client", RedirectURIs: []string{redirectURI}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}}}}
	h, err := sdkauth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := e.connectWith(t, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: e.http, OAuthHandler: h, MaxRetries: -1}, eras[1])
	ts, err := h.TokenSource(context.Background())
	if err != nil || ts == nil {
		t.Fatalf("token source after connecting: %v, %v", ts, err)
	}
	tok, err := ts.Token()
	if err != nil || tok.RefreshToken == "" {
		t.Fatalf("token = %+v, %v; want an access and a refresh token", tok, err)
	}
	first.startProcess(t, "box", "sleep 300")

	refreshed := e.connect(t, refresh(t, e, onlyGrant(t, e, ada, "Greedy Client")["client_id"].(string), tok.RefreshToken), eras[1])
	got := refreshed.fails(t, "process", map[string]any{"action": "start", "sandbox": "box", "command": "sleep 300"})
	if !strings.Contains(got, "HANGAR_BACKGROUND_MAX_PER_TOKEN") || !strings.Contains(got, "OAuth grant") {
		t.Errorf("the refreshed token's start: %q, want a refusal naming the grant's limit", got)
	}
	// The user's own token has its own count.
	e.connect(t, ada, eras[1]).startProcess(t, "box", "sleep 300")
}
