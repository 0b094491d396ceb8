package rest_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/fleet"
	hmcp "github.com/hangar-dev/hangar/internal/mcp"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker"
	"github.com/hangar-dev/hangar/internal/provider/local"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/rest"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
)

// hangarBin is a static hangar binary, run as the local sandboxes' daemon and mounted into
// docker sandboxes.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

const staticSecret = "static-secret-0123456789abcdef0123456789"

type env struct {
	url   string
	admin string
	dir   string

	mu  sync.Mutex // guards now
	now time.Time

	reg            *prometheus.Registry
	streams        *stream.Registry
	grants         e2bapi.Grants // the E2B API's access tokens (/e2b, /e2b/sandbox)
	procs          *process.Manager
	srv            *rest.Server
	bytesPerSecond int64 // 0: the default
	maxBytes       int64 // 0: the default

	store        store.Store
	turns        *turns.Service
	watches      *watch.Service
	fleet        *fleet.Service
	fleetPoll    time.Duration           // how often a followed fleet is read; 0: 20 ms
	withMCP      bool                    // serve /mcp too
	withOAuth    bool                    // serve the OAuth authorization server too (with /mcp)
	maxWatches   int                     // 0: 2 watches per token
	maxStreams   int                     // 0: 4 per token, 6 in all; else this many of each
	maxPerUser   int                     // 0: the default (128)
	maxTokens    int                     // live tokens per user; 0: the default (100)
	maxProcs     int                     // 0: 3 background processes per token
	maxUserProcs int                     // 0: the default (64) background processes per user
	envdBin      string                  // the local sandboxes' daemon; "": hangarBin
	logs         providertest.SyncBuffer // the server's log, for tests that read it
}

// option changes an env before its server starts.
type option func(*env)

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// settableClock is the real clock, except that its time is the env's: timers run in real
// time, while what a test sets as now is what retention and stamps see.
type settableClock struct {
	quartz.Clock
	e *env
}

func (c settableClock) Now(...string) time.Time                      { return c.e.clock() }
func (c settableClock) Since(t time.Time, _ ...string) time.Duration { return c.e.clock().Sub(t) }
func (c settableClock) Until(t time.Time, _ ...string) time.Duration { return t.Sub(c.e.clock()) }

func (e *env) setNow(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t
}

// newEnv serves the REST routes on a real port-0 listener.
func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // registered first, so it runs last
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(staticSecret+" ci user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{now: time.Now(), dir: t.TempDir(), reg: prometheus.NewRegistry()}
	t.Cleanup(func() {
		// A failed test's answer may be a 500 "the server log has the details": here they are.
		if t.Failed() {
			t.Logf("the server's log:\n%s", providertest.LastLines(e.logs.String(), 40))
		}
	})
	e.store = s
	for _, o := range opts {
		o(e)
	}
	a, err := auth.New(ctx, auth.Config{Store: s, TokensFile: tokens, MaxPerUser: e.maxTokens, Clock: settableClock{quartz.NewReal(), e}})
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := a.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.admin = secret
	loc, err := local.New(local.Config{DataDir: e.dir, EnvdBinary: cmp.Or(e.envdBin, hangarBin)})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]provider.Provider{"local": loc}
	if dockerEngineUp() {
		// An instance of its own: tests run in parallel, and the provider names its containers
		// after the instance and the sandbox ("dock" in several tests).
		dock, err := docker.New(docker.Config{EnvdBinary: hangarBin, Instance: "rest-test-" + strings.ToLower(rand.Text()[:8])})
		if err != nil {
			t.Fatal(err)
		}
		providers["docker"] = dock
		t.Cleanup(func() { dock.Close() })
	}
	maxStreams, maxTotal, maxProcs := 4, 6, 3
	if e.maxStreams > 0 {
		maxStreams, maxTotal = e.maxStreams, e.maxStreams
	}
	if e.maxProcs > 0 {
		maxProcs = e.maxProcs
	}
	e.streams = stream.New(stream.Config{MaxPerToken: maxStreams, MaxPerUser: e.maxPerUser, MaxTotal: maxTotal, Check: a.Recheck, Recheck: 200 * time.Millisecond, Registerer: e.reg, BytesPerSecond: e.bytesPerSecond, MaxBytes: e.maxBytes})
	rechecks, stopRechecks := context.WithCancel(context.Background())
	recheckDone := make(chan struct{})
	go func() { e.streams.Run(rechecks); close(recheckDone) }()
	t.Cleanup(func() { stopRechecks(); <-recheckDone })
	sandboxes := sandbox.New(sandbox.Config{Store: s, Streams: e.streams, Providers: providers,
		Unconfigured: map[string]string{"e2b": "set HANGAR_E2B_API_KEY"}})
	t.Cleanup(func() {
		// Local sandboxes' daemons are detached: a test must not leave them running.
		admin := auth.Principal{User: "admin", Scopes: []auth.Scope{auth.ScopeAdmin}}
		sbs, err := sandboxes.List(ctx, admin, false)
		if err != nil {
			t.Errorf("list sandboxes to destroy them: %v", err)
		}
		for _, sb := range sbs {
			if err := sandboxes.Destroy(ctx, admin, sb.Name); err != nil {
				t.Errorf("destroy %s: %v", sb.Name, err)
			}
		}
		sandboxes.Close()
	})
	e.procs, err = process.New(process.Config{Sandboxes: sandboxes, Streams: e.streams, Secret: []byte(strings.Repeat("k", 32)),
		MaxPerToken: maxProcs, MaxPerUser: e.maxUserProcs, Clock: settableClock{quartz.NewReal(), e}, KillGrace: 3 * time.Second, PollAttached: 100 * time.Millisecond, PollIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.procs.Close)
	e.turns = turns.New(turns.Config{Store: s, Streams: e.streams, Sandboxes: turns.FromManager(sandboxes), HarnessBinary: turns.HarnessBinaries(hangarBin),
		RunRoot: filepath.Join(e.dir, "turns"), PollInterval: 20 * time.Millisecond, Follow: true})
	t.Cleanup(e.turns.Close)
	maxWatches := 2
	if e.maxWatches > 0 {
		maxWatches = e.maxWatches
	}
	e.watches = watch.New(watch.Config{Sandboxes: sandboxes, Streams: e.streams, MaxPerToken: maxWatches})
	t.Cleanup(e.watches.Close)
	e.fleet = fleet.New(fleet.Config{Store: s, Processes: e.procs, Streams: e.streams, Poll: cmp.Or(e.fleetPoll, 20*time.Millisecond), Coalesce: 50 * time.Millisecond})
	t.Cleanup(e.fleet.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	var oauthServer *oauth.Server
	mcpCfg := hmcp.Config{Auth: a, Sandboxes: sandboxes, Streams: e.streams, Processes: e.procs, Turns: e.turns, Watches: e.watches}
	if e.withOAuth {
		if oauthServer, err = oauth.New(oauth.Config{Store: s, Auth: a, Issuer: e.url, EndToken: e.streams.EndToken, Clock: settableClock{quartz.NewReal(), e}}); err != nil {
			t.Fatal(err)
		}
		mcpCfg.Resource, mcpCfg.ResourceMetadataURL = oauthServer.Resource(), oauthServer.ResourceMetadataURL()
	}
	var mcpHandler *hmcp.Handler
	if e.withMCP {
		mcpHandler = hmcp.New(mcpCfg)
	}
	cfg := rest.Config{Auth: a, Ready: s.Ping, Sandboxes: sandboxes, Streams: e.streams, Processes: e.procs, Registry: e.reg, MaxBodyBytes: 4096, Clock: settableClock{quartz.NewReal(), e},
		Logger: slog.New(slog.NewTextHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Turns: e.turns, Watches: e.watches, Fleet: e.fleet}
	if mcpHandler != nil {
		cfg.MCP = mcpHandler
	}
	cfg.OAuth = oauthServer
	grants, err := e2bapi.NewGrants([]byte(strings.Repeat("g", 32)), a, sandboxes)
	if err != nil {
		t.Fatal(err)
	}
	e.grants = grants
	cfg.E2B = e2bapi.New(e2bapi.Config{Auth: a, Sandboxes: sandboxes, Grants: grants, Clock: settableClock{quartz.NewReal(), e}, Logger: cfg.Logger})
	cfg.E2BSandbox = e2bapi.NewDaemon(e2bapi.DaemonConfig{Grants: grants, Daemons: sandboxes, Streams: e.streams, Logger: cfg.Logger})
	srv := rest.New(cfg)
	e.srv = srv
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if mcpHandler != nil {
			e.streams.Shutdown()
			mcpHandler.Shutdown(ctx)
		}
		srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return e
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) do(t *testing.T, method, path, token, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return r
}

// wantError checks an error response's status, code and that it has a sentence for a person.
func wantError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (%s)", r.status, status, r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	if e["code"] != code {
		t.Errorf("error.code = %v, want %s (%s)", e["code"], code, r.raw)
	}
	if msg, _ := e["message"].(string); len(msg) < 10 || !strings.HasSuffix(msg, ".") {
		t.Errorf("error.message = %q, want a sentence", msg)
	}
}

func (e *env) newToken(t *testing.T, by, body string) (id, secret string) {
	t.Helper()
	r := e.do(t, "POST", "/api/tokens", by, body)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/tokens %s = %d %s", body, r.status, r.raw)
	}
	return r.body["id"].(string), r.body["token"].(string)
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, expiring := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"], "expires_in": "1h"}`)
	revokedID, revoked := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	if r := e.do(t, "DELETE", "/api/tokens/"+revokedID, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.raw)
	}
	e.setNow(e.clock().Add(2 * time.Hour))
	for name, tok := range map[string]string{"missing": "", "unknown": "hgr_nope", "revoked": revoked, "expired": expiring} {
		t.Run(name, func(t *testing.T) {
			r := e.do(t, "GET", "/api/tokens", tok, "")
			wantError(t, r, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("not bearer", func(t *testing.T) {
		req, _ := http.NewRequest("GET", e.url+"/api/tokens", nil)
		req.Header.Set("Authorization", "Basic "+e.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status = %d, want 401", resp.StatusCode)
		}
	})
}

func TestTokensAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adaID, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"], "description": "laptop"}`)
	bobID, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)

	// A user makes a narrower token for herself, bound to her sandbox; a wider one is refused.
	if r := e.do(t, "POST", "/api/sandboxes", ada, `{"name": "api-refactor", "daemon": false}`); r.status != http.StatusCreated {
		t.Fatalf("create sandbox = %d %s", r.status, r.raw)
	}
	narrowID, narrow := e.newToken(t, ada, `{"scopes": ["mcp"], "sandbox": "api-refactor"}`)
	// Each refusal says who may, and what the user may make instead.
	for body, says := range map[string]string{
		`{"scopes": ["admin"]}`:               "Only an admin can make a token with the admin scope; your token can make tokens with its own scopes (user, mcp).",
		`{"scopes": ["jobs"]}`:                "Your token lacks the jobs scope, so it cannot make a token with it: it can make tokens with its own scopes (user, mcp), and an admin can make one with jobs.",
		`{"user": "bob", "scopes": ["user"]}`: "Only an admin can make tokens for another user (bob); leave the user out to make one for yourself.",
	} {
		r := e.do(t, "POST", "/api/tokens", ada, body)
		wantError(t, r, http.StatusForbidden, "forbidden")
		if er, _ := r.body["error"].(map[string]any); er["message"] != says {
			t.Errorf("POST /api/tokens %s as a user: message %q, want %q", body, er["message"], says)
		}
	}
	// An mcp-only token cannot make tokens.
	wantError(t, e.do(t, "POST", "/api/tokens", narrow, `{"scopes": ["mcp"]}`), http.StatusForbidden, "forbidden")

	// Listing: one's own, admin all, never a secret.
	list := func(tok string) (ids []string, raw string) {
		r := e.do(t, "GET", "/api/tokens", tok, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /api/tokens = %d %s", r.status, r.raw)
		}
		for _, x := range r.body["tokens"].([]any) {
			ids = append(ids, x.(map[string]any)["id"].(string))
		}
		return ids, r.raw
	}
	adaIDs, raw := list(ada)
	slices.Sort(adaIDs)
	want := []string{adaID, narrowID}
	slices.Sort(want)
	if !slices.Equal(adaIDs, want) {
		t.Errorf("ada lists %v, want her two tokens", adaIDs)
	}
	allIDs, allRaw := list(e.admin)
	if len(allIDs) != 5 { // admin, ada, bob, narrow, static
		t.Errorf("admin lists %v, want 5 tokens", allIDs)
	}
	for _, secret := range []string{ada, bob, narrow, e.admin, staticSecret} {
		if strings.Contains(raw+allRaw, secret) || strings.Contains(raw+allRaw, secret[8:]) {
			t.Errorf("a token list shows a secret")
		}
	}
	if strings.Contains(allRaw, `"token"`) {
		t.Error("a token list has a token field")
	}

	// Revocation: refused from the very next request.
	wantError(t, e.do(t, "DELETE", "/api/tokens/"+bobID, ada, ""), http.StatusNotFound, "not_found")
	if r := e.do(t, "GET", "/api/whoami", bob, ""); r.status != http.StatusOK || r.body["user"] != "bob" {
		t.Fatalf("whoami(bob) = %d %s", r.status, r.raw)
	} else if _, ok := r.body["sandbox"]; ok {
		t.Errorf("whoami of a token bound to no sandbox has a sandbox: %s", r.raw)
	}
	if r := e.do(t, "DELETE", "/api/tokens/"+bobID, bob, ""); r.status != http.StatusNoContent {
		t.Fatalf("bob revoking his token = %d %s", r.status, r.raw)
	}
	wantError(t, e.do(t, "GET", "/api/whoami", bob, ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, e.do(t, "DELETE", "/api/tokens/tok_nope", e.admin, ""), http.StatusNotFound, "not_found")

	// A static token cannot be revoked through the API.
	staticIDs, _ := list(staticSecret)
	if len(staticIDs) != 1 {
		t.Fatalf("the static token lists %v, want itself", staticIDs)
	}
	wantError(t, e.do(t, "DELETE", "/api/tokens/"+staticIDs[0], e.admin, ""), http.StatusConflict, "conflict")
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not json", "POST", "/api/tokens", `{"user": `, 400, "bad_request"},
		{"unknown field", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"], "admin": true}`, 400, "bad_request"},
		{"two values", "POST", "/api/tokens", `{"scopes": ["user"]} {}`, 400, "bad_request"},
		{"trailing brace", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"]}}`, 400, "bad_request"},
		{"trailing bracket", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"]}]`, 400, "bad_request"},
		{"trailing garbage", "POST", "/api/tokens", "{\"user\": \"ada\", \"scopes\": [\"user\"]}\nx", 400, "bad_request"},
		{"invalid utf-8", "POST", "/api/tokens", "{\"user\": \"ada\", \"scopes\": [\"user\"], \"description\": \"caf\xe9\"}", 400, "bad_request"},
		{"lone surrogate", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"], "description": "\ud800"}`, 400, "bad_request"},
		{"truncated utf-8", "POST", "/api/tokens", "{\"user\": \"ada\", \"scopes\": [\"user\"], \"description\": \"\xe2\x82\"}", 400, "bad_request"},
		{"unknown scope", "POST", "/api/tokens", `{"user": "ada", "scopes": ["root"]}`, 400, "bad_request"},
		{"no scopes", "POST", "/api/tokens", `{"user": "ada"}`, 400, "bad_request"},
		{"bad expiry", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"], "expires_in": "soon"}`, 400, "bad_request"},
		{"both expiries", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"], "expires_in": "1h", "expires_at": "2030-01-01T00:00:00Z"}`, 400, "bad_request"},
		{"bad sandbox", "POST", "/api/tokens", `{"user": "ada", "scopes": ["user"], "sandbox": "No_Way"}`, 400, "bad_request"},
		{"too large", "POST", "/api/tokens", `{"description": "` + strings.Repeat("x", 5000) + `", "scopes": ["user"]}`, 413, "too_large"},
		{"no route", "GET", "/api/nothing", "", 404, "not_found"},
		{"wrong method", "PUT", "/api/tokens", "", 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, e.do(t, c.method, c.path, e.admin, c.body), c.status, c.code)
		})
	}
}

// TestMethodNotAllowedSaysAllow: a 405 names the methods the path takes, in Allow (RFC 9110)
// and in its sentence.
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for path, want := range map[string]string{"/api/tokens": "GET, POST", "/api/sandboxes/x/exec": "POST"} {
		r := e.do(t, "PUT", path, e.admin, "")
		wantError(t, r, 405, "method_not_allowed")
		if got := r.header.Get("Allow"); got != want || !strings.Contains(r.raw, want) {
			t.Errorf("PUT %s: Allow %q, body %s; want %q in both", path, got, r.raw, want)
		}
	}
}

// TestStrictBodyAcceptsWhiteSpace: what decodeJSON refuses is data after the value, not the
// newline that curl and most encoders end a body with; valid UTF-8 of any plane is kept as is.
func TestStrictBodyAcceptsWhiteSpace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(t, "POST", "/api/tokens", e.admin, "{\"user\": \"ada\", \"scopes\": [\"user\"], \"description\": \"café ☕ 🚀\"}\r\n\t ")
	if r.status != http.StatusCreated {
		t.Fatalf("status = %d, want 201 (%s)", r.status, r.raw)
	}
	if d := r.body["description"]; d != "café ☕ 🚀" {
		t.Errorf("description = %q, want it unchanged", d)
	}
}

// TestShutdownTwice: a second Shutdown (a second signal, a deferred one after an explicit one)
// waits for the same drain instead of panicking.
func TestShutdownTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown %d: %v", i+1, err)
		}
	}
}

// TestClientGoneIsNotAnError: a client that leaves while its command runs is no fault of
// hangar's: the log says so below ERROR.
func TestClientGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/api/sandboxes/box/exec", strings.NewReader(sleeper(pidFile)))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	pid := pidOf(t, pidFile)
	cancel()
	<-done
	waitDead(t, pid)
	// Shutdown waits for the request's handler to have finished, log line included.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := e.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	logs := e.logs.String()
	if strings.Contains(logs, "level=ERROR") {
		t.Errorf("a client that went away was logged as an error:\n%s", logs)
	}
	if !strings.Contains(logs, "the client went away") {
		t.Errorf("the log does not say the client went away:\n%s", logs)
	}
}

func TestTooLargeWithoutContentLength(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"description": "`))
		pw.Write([]byte(strings.Repeat("x", 8192)))
		pw.Write([]byte(`", "scopes": ["user"]}`))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", e.url+"/api/tokens", pr) // chunked: no Content-Length
	req.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", resp.StatusCode)
	}
}

// TestTokensPerUser: POST /api/tokens past HANGAR_TOKENS_MAX_PER_USER is a 409 whose message
// names the bound and how to make room (no Retry-After: waiting frees nothing); revoking one
// makes room.
func TestTokensPerUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.maxTokens = 2 })
	id, mallory := e.newToken(t, e.admin, `{"user": "mallory", "scopes": ["user"]}`)
	e.newToken(t, mallory, `{"scopes": ["user"]}`)
	r := e.do(t, "POST", "/api/tokens", mallory, `{"scopes": ["user"]}`)
	wantError(t, r, http.StatusConflict, "conflict")
	if !strings.Contains(r.raw, "HANGAR_TOKENS_MAX_PER_USER") || !strings.Contains(r.raw, "DELETE /api/tokens/{id}") || r.header.Get("Retry-After") != "" {
		t.Errorf("the refusal = %v %s, want the setting named, how to revoke, and no Retry-After", r.header, r.raw)
	}
	if r := e.do(t, "DELETE", "/api/tokens/"+id, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", r.status, r.raw)
	}
	e.newToken(t, e.admin, `{"user": "mallory", "scopes": ["user"]}`)
}

func TestTokensNeedUserScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, mcpOnly := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["mcp"]}`)
	id, _ := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	wantError(t, e.do(t, "GET", "/api/tokens", mcpOnly, ""), http.StatusForbidden, "forbidden")
	wantError(t, e.do(t, "DELETE", "/api/tokens/"+id, mcpOnly, ""), http.StatusForbidden, "forbidden")
}

// TestShutdownRefusalSaysNotOwner: a request that starts after Drain (the start of a shutdown,
// once the sandboxes are handed over) gets 503; one another replica forwarded is marked so that
// replica sends it to the sandbox's new owner instead of passing the 503 on to its client (a
// rolling update's handover); a client's own is not.
func TestShutdownRefusalSaysNotOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srv.Drain()
	for _, forwarded := range []bool{false, true} {
		req := httptest.NewRequest("GET", "/api/sandboxes/box/processes", nil)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		if forwarded {
			req.Header.Set(forward.Header, "http://127.0.0.1:1")
		}
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		moved := rec.Header().Get(forward.MovedHeader)
		if rec.Code != http.StatusServiceUnavailable || (moved != "") != forwarded {
			t.Errorf("forwarded %v: %d, %s %q; want 503, and the header only when forwarded", forwarded, rec.Code, forward.MovedHeader, moved)
		}
	}
}
