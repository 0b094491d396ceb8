package oauthhttp_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/oauthhttp"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is the OAuth server on a real port-0 listener, over SQLite, with a settable clock,
// ada (a user with a user+mcp token and a sandbox "box") and bob (a sandbox "bobs").
type fixture struct {
	url   string
	store store.Store
	auth  *auth.Authenticator
	ada   string // ada's token: user, mcp
	adaID string

	mu    sync.Mutex
	now   time.Time
	ended []string // the token ids EndToken was called with
}

const redirect = "http://127.0.0.1:9/cb"

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// fixtureClock is a fixture's settable time (its clock method) as a quartz.Clock; only Now
// is asked of it.
type fixtureClock struct {
	quartz.Clock // nil
	now          func() time.Time
}

func (c fixtureClock) Now(...string) time.Time { return c.now() }

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fixture) endedTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ended...)
}

func newFixture(t *testing.T, change func(*oauth.Config)) *fixture {
	t.Helper()
	return newFixtureBound(t, 0, change)
}

// newFixtureBound is newFixture with at most maxTokens live tokens and grants per user (0: the
// default).
func newFixtureBound(t *testing.T, maxTokens int, change func(*oauth.Config)) *fixture {
	t.Helper()
	return newFixtureHTTP(t, maxTokens, change, nil)
}

// newFixtureHTTP is newFixtureBound with changes to the endpoints' own Config too.
func newFixtureHTTP(t *testing.T, maxTokens int, change func(*oauth.Config), changeHTTP func(*oauthhttp.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{store: s, now: time.Now().Truncate(time.Millisecond)}
	if f.auth, err = auth.New(ctx, auth.Config{Store: s, Clock: fixtureClock{now: f.clock}, MaxPerUser: maxTokens}); err != nil {
		t.Fatal(err)
	}
	secret, _, err := f.auth.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := f.auth.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.auth.CreateToken(ctx, admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}})
	if err != nil {
		t.Fatal(err)
	}
	f.ada, f.adaID = c.Secret, c.Token.ID
	for name, owner := range map[string]string{"box": "ada", "bobs": "bob"} {
		if _, err := s.EnsureUser(ctx, owner); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSandbox(ctx, store.Sandbox{Name: name, Owner: owner, Provider: "local", State: "running", CreatedAt: f.now, UpdatedAt: f.now}); err != nil {
			t.Fatal(err)
		}
	}
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	cfg := oauth.Config{Store: s, Auth: f.auth, Issuer: srv.URL, Clock: fixtureClock{now: f.clock}, EndToken: func(id string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ended = append(f.ended, id)
	}}
	if change != nil {
		change(&cfg)
	}
	o, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var hcfg oauthhttp.Config
	if changeHTTP != nil {
		changeHTTP(&hcfg)
	}
	r := chi.NewRouter()
	r.Group(oauthhttp.New(o, hcfg).Routes)
	h = r
	return f
}

// post sends a form (or, with json set, a JSON body) and returns the status and the JSON answer.
func (f *fixture) post(t *testing.T, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(f.url+path, form)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resp)
}

func decode(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("body is not JSON: %q", raw)
		}
	}
	return resp.StatusCode, out
}

// register registers a client dynamically and returns its id.
func (f *fixture) register(t *testing.T, name string, redirects ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": redirects})
	resp, err := http.Post(f.url+"/oauth/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	status, out := decode(t, resp)
	if status != http.StatusCreated {
		t.Fatalf("register = %d %v", status, out)
	}
	return out["client_id"].(string)
}

// pkce returns a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authParams is a valid authorization request of client.
func authParams(client, challenge string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirect}, "state": {"st4te"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "scope": {"mcp"}}
}

// browser is a person's browser: it keeps cookies and does not follow redirects.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// page opens the authorization endpoint with q and returns the response and its body.
func (f *fixture) page(t *testing.T, b *http.Client, q url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := b.Get(f.url + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// consentForm opens the consent page for q and returns its form, filled to allow mcp as ada.
func (f *fixture) consentForm(t *testing.T, b *http.Client, q url.Values) url.Values {
	t.Helper()
	resp, body := f.page(t, b, q)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("consent page = %d %s", resp.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form.Set("token", f.ada)
	form.Set("grant_scope", "mcp")
	form.Set("action", "allow")
	return form
}

// submit posts the consent form and returns the response and its body.
func (f *fixture) submit(t *testing.T, b *http.Client, form url.Values, header http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.url+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// code runs the consent as ada (with the form changed by change) and returns the code.
func (f *fixture) code(t *testing.T, client, challenge string, change func(url.Values)) string {
	t.Helper()
	b := browser()
	form := f.consentForm(t, b, authParams(client, challenge))
	if change != nil {
		change(form)
	}
	resp, body := f.submit(t, b, form, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent = %d %s", resp.StatusCode, body)
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	q := loc.Query()
	if q.Get("code") == "" || q.Get("state") != "st4te" || q.Get("iss") != f.url || !strings.HasPrefix(loc.String(), redirect+"?") {
		t.Fatalf("consent sent the person to %s; want %s with a code, the state and iss", loc, redirect)
	}
	return q.Get("code")
}

// exchange redeems a code.
func (f *fixture) exchange(t *testing.T, client, code, verifier string) (int, map[string]any) {
	t.Helper()
	return f.post(t, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code},
		"redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {f.url + "/mcp"}})
}

// tokens runs the whole flow for client and returns the token response.
func (f *fixture) tokens(t *testing.T, client string) map[string]any {
	t.Helper()
	v, c := pkce()
	status, out := f.exchange(t, client, f.code(t, client, c, nil), v)
	if status != http.StatusOK {
		t.Fatalf("token = %d %v", status, out)
	}
	return out
}

func (f *fixture) refresh(t *testing.T, client, rt string) (int, map[string]any) {
	t.Helper()
	return f.post(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {rt}})
}

func wantOAuthError(t *testing.T, status int, out map[string]any, wantStatus int, code string) {
	t.Helper()
	if status != wantStatus || out["error"] != code || out["error_description"] == "" {
		t.Errorf("answer = %d %v; want %d with error %s and a description", status, out, wantStatus, code)
	}
}
