package e2bapi_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/local"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

const testTimeout = 60 * time.Second

// env is hangar's E2B API on a real port-0 server over the local provider, with ada's and
// bob's tokens.
type env struct {
	url       string
	clock     *quartz.Mock
	auth      *auth.Authenticator
	sandboxes *sandbox.Manager
	grants    e2bapi.Grants
	admin     auth.Principal
	ada, bob  string // API keys
	adaP      auth.Principal
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, "dev=local", nil)
}

// newEnvWith is newEnv with the templates given and more providers beside local.
func newEnvWith(t *testing.T, templateList string, more map[string]provider.Provider) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{clock: quartz.NewMock(t)}
	if e.auth, err = auth.New(ctx, auth.Config{Store: st, Clock: e.clock}); err != nil {
		t.Fatal(err)
	}
	admin, _, err := e.auth.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.admin, err = e.auth.Authenticate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	loc, err := local.New(local.Config{DataDir: t.TempDir(), EnvdBinary: hangarBin})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]provider.Provider{"local": loc}
	maps.Copy(providers, more)
	e.sandboxes = sandbox.New(sandbox.Config{Store: st, Providers: providers, Default: "local", Clock: e.clock})
	t.Cleanup(func() {
		// Local sandboxes' daemons are detached: none may outlive the test.
		sbs, _ := e.sandboxes.List(ctx, e.admin, false)
		for _, sb := range sbs {
			if err := e.sandboxes.Destroy(ctx, e.admin, sb.Name); err != nil {
				t.Errorf("destroy %s: %v", sb.Name, err)
			}
		}
		e.sandboxes.Close()
	})
	if e.grants, err = e2bapi.NewGrants([]byte(strings.Repeat("s", 32)), e.auth, e.sandboxes); err != nil {
		t.Fatal(err)
	}
	templates, err := e2bapi.ParseTemplates(templateList)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e2bapi.New(e2bapi.Config{Auth: e.auth, Sandboxes: e.sandboxes, Grants: e.grants, Templates: templates, Clock: e.clock}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.ada, e.adaP = e.token(t, "ada", "")
	e.bob, _ = e.token(t, "bob", "")
	return e
}

// token makes a user-scoped token of user (bound to sandbox unless "") and returns its secret.
func (e *env) token(t *testing.T, user, sandbox string) (string, auth.Principal) {
	t.Helper()
	c, err := e.auth.CreateToken(context.Background(), e.admin, auth.NewToken{User: user, Scopes: []auth.Scope{auth.ScopeUser}, Sandbox: sandbox})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.auth.Authenticate(context.Background(), c.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return c.Secret, p
}

type answer struct {
	status int
	header http.Header
	raw    string
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(a.raw), v); err != nil {
		t.Fatalf("body %q: %v", a.raw, err)
	}
}

// do calls the API with key as the SDK does (X-API-Key).
func (e *env) do(t *testing.T, method, path, key, body string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(raw)}
}

// wantError checks an answer is E2B's error shape with status, and a sentence.
func wantError(t *testing.T, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	a.json(t, &body)
	if body.Code != status || len(body.Message) < 10 {
		t.Errorf("error body %s: want code %d and a sentence", a.raw, status)
	}
}

type created struct {
	SandboxID, TemplateID, ClientID, EnvdVersion, EnvdAccessToken string
	Domain                                                        *string
}

func (e *env) create(t *testing.T, key, body string) created {
	t.Helper()
	a := e.do(t, "POST", "/v2/sandboxes", key, body)
	if a.status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", body, a.status, a.raw)
	}
	var c created
	a.json(t, &c)
	return c
}

type info struct {
	SandboxID, TemplateID, State, EnvdVersion, EnvdAccessToken string
	StartedAt, EndAt                                           *time.Time
	Metadata                                                   map[string]string
	Lifecycle                                                  struct{ OnTimeout string }
}

func (e *env) info(t *testing.T, key, id string) info {
	t.Helper()
	a := e.do(t, "GET", "/sandboxes/"+id, key, "")
	if a.status != http.StatusOK {
		t.Fatalf("info %s: %d %s", id, a.status, a.raw)
	}
	var i info
	a.json(t, &i)
	return i
}

// TestSandboxLife: create with metadata and env, info, setTimeout, kill, as the SDK calls them.
func TestSandboxLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.create(t, e.ada, `{"templateID": "base", "timeout": 300, "metadata": {"team": "blue"}, "envVars": {"GREETING": "hi"}, "secure": true, "allow_internet_access": null, "network": null}`)
	if c.SandboxID == "" || c.TemplateID != "base" || c.EnvdVersion != e2bapi.EnvdVersion || c.EnvdAccessToken == "" || c.ClientID == "" || c.Domain != nil {
		t.Errorf("create answered %+v", c)
	}
	sb, err := e.sandboxes.View(context.Background(), e.adaP, c.SandboxID)
	if err != nil || sb.Owner != "ada" || sb.Env["GREETING"] != "hi" || sb.Provider != "local" || !sb.HasDaemon {
		t.Errorf("the hangar sandbox = %+v, %v; want ada's, local, with a daemon and GREETING=hi", sb, err)
	}
	got := e.info(t, e.ada, c.SandboxID)
	start := e.clock.Now().Truncate(time.Millisecond)
	if got.State != "running" || got.Metadata["team"] != "blue" || got.TemplateID != "base" || got.Lifecycle.OnTimeout != "kill" ||
		!got.StartedAt.Equal(start) || !got.EndAt.Equal(start.Add(300*time.Second)) {
		t.Errorf("info = %+v, want running, team=blue, base, kill, started now, ending in 300 s", got)
	}
	e.clock.Advance(10 * time.Second)
	if a := e.do(t, "POST", "/sandboxes/"+c.SandboxID+"/timeout", e.ada, `{"timeout": 30}`); a.status != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", a.status, a.raw)
	}
	if got := e.info(t, e.ada, c.SandboxID); !got.EndAt.Equal(start.Add(40 * time.Second)) {
		t.Errorf("after setTimeout(30 s) at +10 s: end %v, want %v", got.EndAt, start.Add(40*time.Second))
	}
	wantError(t, e.do(t, "POST", "/sandboxes/"+c.SandboxID+"/timeout", e.ada, `{}`), http.StatusBadRequest)
	wantError(t, e.do(t, "POST", "/sandboxes/"+c.SandboxID+"/timeout", e.ada, `{"timeout": 999999}`), http.StatusBadRequest)
	wantError(t, e.do(t, "GET", "/sandboxes/"+c.SandboxID+"/metrics", e.ada, ""), http.StatusNotImplemented)
	if a := e.do(t, "DELETE", "/sandboxes/"+c.SandboxID, e.ada, ""); a.status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", a.status, a.raw)
	}
	wantError(t, e.do(t, "GET", "/sandboxes/"+c.SandboxID, e.ada, ""), http.StatusNotFound)
	wantError(t, e.do(t, "DELETE", "/sandboxes/"+c.SandboxID, e.ada, ""), http.StatusNotFound) // the SDK's kill then says false
}

// TestList: the metadata filter as the SDK encodes it, the state filter, and pagination by
// X-Next-Token.
func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	blue1 := e.create(t, e.ada, `{"timeout": 300, "metadata": {"team": "blue", "k&=": "v w"}}`)
	e.clock.Advance(time.Second)
	blue2 := e.create(t, e.ada, `{"timeout": 300, "metadata": {"team": "blue"}}`)
	e.clock.Advance(time.Second)
	red := e.create(t, e.ada, `{"timeout": 300, "metadata": {"team": "red"}}`)
	e.create(t, e.bob, `{"timeout": 300, "metadata": {"team": "blue"}}`)
	if a := e.do(t, "POST", "/sandboxes/"+red.SandboxID+"/pause", e.ada, ""); a.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", a.status, a.raw)
	}
	wantError(t, e.do(t, "POST", "/sandboxes/"+red.SandboxID+"/pause", e.ada, ""), http.StatusConflict) // the SDK's pause says false

	ids := func(path string) ([]string, string) {
		t.Helper()
		a := e.do(t, "GET", path, e.ada, "")
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.raw)
		}
		var got []info
		a.json(t, &got)
		var out []string
		for _, i := range got {
			out = append(out, i.SandboxID)
		}
		return out, a.header.Get("X-Next-Token")
	}
	// The SDK: URLSearchParams of each key and value escaped, as one metadata parameter.
	sdkMeta := func(pairs ...string) string {
		v := url.Values{}
		for i := 0; i < len(pairs); i += 2 {
			v.Set(url.QueryEscape(pairs[i]), url.QueryEscape(pairs[i+1]))
		}
		return url.QueryEscape(v.Encode())
	}
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"all of ada's, newest first", "", []string{red.SandboxID, blue2.SandboxID, blue1.SandboxID}},
		{"oldest first", "?order=asc", []string{blue1.SandboxID, blue2.SandboxID, red.SandboxID}},
		{"metadata", "?metadata=" + sdkMeta("team", "blue"), []string{blue2.SandboxID, blue1.SandboxID}},
		{"metadata escaped", "?metadata=" + sdkMeta("team", "blue", "k&=", "v w"), []string{blue1.SandboxID}},
		{"running", "?state=running", []string{blue2.SandboxID, blue1.SandboxID}},
		{"paused", "?state=paused", []string{red.SandboxID}},
		{"both", "?state=running,paused", []string{red.SandboxID, blue2.SandboxID, blue1.SandboxID}},
	} {
		if got, _ := ids("/v2/sandboxes" + c.query); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.want)
		}
	}
	page1, next := ids("/v2/sandboxes?limit=2")
	if len(page1) != 2 || next == "" {
		t.Fatalf("first page of 2 = %v, next %q", page1, next)
	}
	page2, last := ids("/v2/sandboxes?limit=2&nextToken=" + url.QueryEscape(next))
	if len(page2) != 1 || page2[0] != blue1.SandboxID || last != "" {
		t.Errorf("second page = %v, next %q; want [%s] and no more", page2, last, blue1.SandboxID)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?state=killed", "?nextToken=zz!", "?order=sideways"} {
		wantError(t, e.do(t, "GET", "/v2/sandboxes"+q, e.ada, ""), http.StatusBadRequest)
	}
}

// TestErrors: what the SDK turns into AuthenticationError, NotFoundError and its other
// errors, each with a sentence; another user's sandbox is not found.
func TestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.create(t, e.ada, `{"timeout": 300}`)
	bound, _ := e.token(t, "ada", c.SandboxID)
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
	}{
		{"no key", "GET", "/v2/sandboxes", "", "", 401},
		{"wrong key", "GET", "/v2/sandboxes", "hgr_wrong", "", 401},
		{"unknown template", "POST", "/v2/sandboxes", e.ada, `{"templateID": "nope"}`, 404},
		{"bad timeout", "POST", "/v2/sandboxes", e.ada, `{"timeout": -1}`, 400},
		{"zero timeout", "POST", "/v2/sandboxes", e.ada, `{"timeout": 0}`, 400},
		{"not JSON", "POST", "/v2/sandboxes", e.ada, `{"timeout": `, 400},
		{"no internet", "POST", "/v2/sandboxes", e.ada, `{"allow_internet_access": false}`, 501},
		{"auto-resume", "POST", "/v2/sandboxes", e.ada, `{"autoPause": true, "autoResume": {"enabled": true}}`, 501},
		{"bound token creates", "POST", "/v2/sandboxes", bound, `{}`, 403},
		{"bound token kills", "DELETE", "/sandboxes/" + c.SandboxID, bound, "", 403},
		{"other's info", "GET", "/sandboxes/" + c.SandboxID, e.bob, "", 404},
		{"other's kill", "DELETE", "/sandboxes/" + c.SandboxID, e.bob, "", 404},
		{"other's timeout", "POST", "/sandboxes/" + c.SandboxID + "/timeout", e.bob, `{"timeout": 5}`, 404},
		{"other's connect", "POST", "/v2/sandboxes/" + c.SandboxID + "/connect", e.bob, `{"timeout": 5}`, 404},
		{"other's pause", "POST", "/sandboxes/" + c.SandboxID + "/pause", e.bob, "", 404},
		{"no such sandbox", "GET", "/sandboxes/e2b-nope", e.ada, "", 404},
		{"not a sandbox id", "GET", "/sandboxes/NOT_AN_ID", e.ada, "", 404},
		{"template builds", "POST", "/v3/templates", e.ada, `{}`, 501},
		{"snapshots", "GET", "/snapshots", e.ada, "", 501},
		{"volumes", "GET", "/volumes", e.ada, "", 501},
		{"secrets", "GET", "/secrets", e.ada, "", 501},
		{"nothing there", "GET", "/teams", e.ada, "", 404},
		{"not-offered needs a key too", "GET", "/volumes", "", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.do(t, tc.method, tc.path, tc.key, tc.body), tc.status)
		})
	}
	if got := e.info(t, bound, c.SandboxID); got.SandboxID != c.SandboxID {
		t.Errorf("the bound token's info = %+v", got)
	}
}

// TestTimeoutEnds: a sandbox whose timeout passes is killed, or paused with autoPause; connect
// resumes the paused one with a new timeout; connect never shortens a running one's.
func TestTimeoutEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	killed := e.create(t, e.ada, `{"timeout": 60}`)
	paused := e.create(t, e.ada, `{"timeout": 60, "autoPause": true}`)
	long := e.create(t, e.ada, `{"timeout": 600}`)
	if got := e.info(t, e.ada, paused.SandboxID); got.Lifecycle.OnTimeout != "pause" {
		t.Errorf("autoPause sandbox's lifecycle.onTimeout = %q, want pause", got.Lifecycle.OnTimeout)
	}
	e.clock.Advance(59 * time.Second)
	if did, err := e.sandboxes.ExpireDue(ctx); err != nil || len(did) != 0 {
		t.Fatalf("ExpireDue a second early = %v, %v", did, err)
	}
	e.clock.Advance(time.Second)
	if did, err := e.sandboxes.ExpireDue(ctx); err != nil || len(did) != 2 {
		t.Fatalf("ExpireDue at the timeout = %+v, %v; want killed and paused ended", did, err)
	}
	wantError(t, e.do(t, "GET", "/sandboxes/"+killed.SandboxID, e.ada, ""), http.StatusNotFound)
	if got := e.info(t, e.ada, paused.SandboxID); got.State != "paused" || got.EndAt != nil {
		t.Errorf("autoPause sandbox after its timeout: %+v, want paused with no end", got)
	}
	a := e.do(t, "POST", "/v2/sandboxes/"+paused.SandboxID+"/connect", e.ada, `{"timeout": 120}`)
	if a.status != http.StatusOK {
		t.Fatalf("connect: %d %s", a.status, a.raw)
	}
	var c created
	a.json(t, &c)
	if c.SandboxID != paused.SandboxID || c.EnvdAccessToken == "" {
		t.Errorf("connect answered %+v", c)
	}
	now := e.clock.Now().Truncate(time.Millisecond)
	if got := e.info(t, e.ada, paused.SandboxID); got.State != "running" || !got.EndAt.Equal(now.Add(120*time.Second)) {
		t.Errorf("after connect: %+v, want running until %v", got, now.Add(120*time.Second))
	}
	before := e.info(t, e.ada, long.SandboxID).EndAt
	if a := e.do(t, "POST", "/v2/sandboxes/"+long.SandboxID+"/connect", e.ada, `{"timeout": 10}`); a.status != http.StatusOK {
		t.Fatalf("connect: %d %s", a.status, a.raw)
	}
	if got := e.info(t, e.ada, long.SandboxID).EndAt; !got.Equal(*before) {
		t.Errorf("connect with a shorter timeout moved the end from %v to %v", before, got)
	}
}
