package rest_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// oauthGrant makes a grant of ada's, bound to ada-box, through the OAuth flow's first half:
// a client registers and the owner consents. It returns the grant's id.
func (w *world) oauthGrant(t *testing.T) string {
	t.Helper()
	name := w.name("client")
	const redirect = "http://127.0.0.1:9/cb"
	r := w.e.do(t, "POST", "/oauth/register", "", `{"client_name": "`+name+`", "redirect_uris": ["`+redirect+`"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.status, r.raw)
	}
	sum := sha256.Sum256([]byte(strings.Repeat("v", 43)))
	q := url.Values{"response_type": {"code"}, "client_id": {r.body["client_id"].(string)}, "redirect_uri": {redirect},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "scope": {"mcp"}}
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := b.Get(w.e.url + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form.Set("token", w.tokens[ownerCol])
	form.Set("grant_scope", "mcp")
	form.Set("sandbox", "ada-box")
	form.Set("action", "allow")
	resp, err = b.PostForm(w.e.url+"/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent = %d", resp.StatusCode)
	}
	gs, err := w.e.store.ListOAuthGrants(context.Background(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.ClientName == name {
			return g.ID
		}
	}
	b2, _ := json.Marshal(gs)
	t.Fatalf("no grant of %s in %s", name, b2)
	return ""
}

// TestAudienceTokenRefusedUnderAPI: a token issued for a resource (an OAuth access token, for
// /mcp) is refused under /api whatever its scopes (RFC 8707), while the same token without an
// audience is let in.
func TestAudienceTokenRefusedUnderAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.store.EnsureUser(ctx, "ada"); err != nil {
		t.Fatal(err)
	}
	for i, audience := range []string{"", e.url + "/mcp"} {
		secret := "hgr_audience" + strings.Repeat("x", 40) + string(rune('a'+i))
		tok := store.Token{ID: "tok_aud" + string(rune('a'+i)), User: "ada", Hash: auth.HashSecret(secret), Hint: secret[:8],
			Scopes: []string{"mcp", "jobs", "user"}, CreatedAt: e.clock(), Audience: audience}
		if err := e.store.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if audience != "" {
			want = http.StatusUnauthorized
		}
		for _, path := range []string{"/api/whoami", "/api/jobs"} {
			if r := e.do(t, "GET", path, secret, ""); r.status != want {
				t.Errorf("GET %s with a token of audience %q = %d %s, want %d", path, audience, r.status, r.raw, want)
			}
		}
	}
}
