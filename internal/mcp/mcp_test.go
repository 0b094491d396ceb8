package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/auth"
	hmcp "github.com/hangar-dev/hangar/internal/mcp"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/local"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/rest"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
)

// hangarBin is a static hangar binary, run as the local sandboxes' daemon.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

// Fixed timeouts: generous, since the machine may be busy; a step that passes them has failed.
const (
	callTimeout = 30 * time.Second
	pollTimeout = 10 * time.Second
)

// The protocol revisions a client may speak: the 2025 era (initialize, sessions) and the
// stateless one.
var eras = []string{"2025-11-25", "2026-07-28"}

// ringBytes is how much output the tests' process manager keeps per process: little, so that
// gaps are cheap to make.
const ringBytes = 4096

// staticSecret is a tokens-file token with the mcp scope.
const staticSecret = "static-secret-0123456789abcdef0123456789"

type env struct {
	url     string
	admin   string
	streams *stream.Registry
	mcp     *hmcp.Handler
	procs   *process.Manager
	turns   *turns.Service // with envOptions.turns
	http    *http.Client   // without a token; clients add theirs
}

type envOptions struct {
	maxPerToken int // 0: 4
	maxPerUser  int // 0: the default (128)
	// maxProcsPerToken and maxProcsPerUser bound background processes per token (grant) and
	// per user. 0: the defaults (16 and 64).
	maxProcsPerToken, maxProcsPerUser int
	keepAlive                         time.Duration // 0: the default
	maxBytes                          int64         // 0: the default
	// The 2025-era sessions' idle timeout and cap per token. 0: the defaults.
	sessionIdle      time.Duration
	sessionsPerToken int
	// turns serves sessions, turns and jobs (REST and MCP); clock is the MCP handler's.
	turns bool
	clock quartz.Clock
	// watches serves the watch resource, two watches per token.
	watches bool
	// maxBody caps request bodies, REST's and /mcp's, as HANGAR_MAX_BODY_BYTES does. 0: the
	// defaults.
	maxBody int64
	// oauth serves the OAuth authorization server (oauth_test.go), with these changes to its
	// Config.
	oauth func(*oauth.Config)
}

// newEnv serves the REST routes and /mcp on a real port-0 listener, over the local provider.
func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // registered first, so it runs last
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(staticSecret+" ci user,mcp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(ctx, auth.Config{Store: s, TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{http: &http.Client{Transport: &http.Transport{}}}
	if e.admin, _, err = a.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	loc, err := local.New(local.Config{DataDir: t.TempDir(), EnvdBinary: hangarBin})
	if err != nil {
		t.Fatal(err)
	}
	if o.maxPerToken == 0 {
		o.maxPerToken = 4
	}
	reg := prometheus.NewRegistry()
	recheck := 200 * time.Millisecond
	if o.clock != nil {
		recheck = time.Hour // a test's clock moves only for what it tests
	}
	// The subscriptions' streams coalesce on the registry's clock: the test's, when it has one.
	e.streams = stream.New(stream.Config{MaxPerToken: o.maxPerToken, MaxPerUser: o.maxPerUser, MaxBytes: o.maxBytes, Check: a.Recheck, Recheck: recheck, Registerer: reg,
		Clock: o.clock})
	rechecks, stopRechecks := context.WithCancel(context.Background())
	recheckDone := make(chan struct{})
	go func() { e.streams.Run(rechecks); close(recheckDone) }()
	t.Cleanup(func() { stopRechecks(); <-recheckDone })
	sandboxes := sandbox.New(sandbox.Config{Store: s, Streams: e.streams, Providers: map[string]provider.Provider{"local": loc}})
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
	quiet := slog.New(slog.DiscardHandler)
	e.procs, err = process.New(process.Config{Sandboxes: sandboxes, Streams: e.streams, Secret: []byte(strings.Repeat("k", 32)),
		MaxPerToken: o.maxProcsPerToken, MaxPerUser: o.maxProcsPerUser, RingBytes: ringBytes, PollAttached: 100 * time.Millisecond, PollIdle: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.procs.Close) // after the server's shutdown, before the sandboxes are destroyed
	if o.turns {
		e.turns = turns.New(turns.Config{Store: s, Streams: e.streams, Sandboxes: turns.FromManager(sandboxes), HarnessBinary: turns.HarnessBinaries(hangarBin),
			RunRoot: filepath.Join(t.TempDir(), "turns"), PollInterval: 100 * time.Millisecond, Follow: true, Logger: quiet})
		t.Cleanup(e.turns.Close)
	}
	var watches *watch.Service
	if o.watches {
		watches = watch.New(watch.Config{Sandboxes: sandboxes, Streams: e.streams, MaxPerToken: 2, Logger: quiet})
		t.Cleanup(watches.Close)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	var oauthServer *oauth.Server
	var resource, metadataURL string
	if o.oauth != nil {
		cfg := oauth.Config{Store: s, Auth: a, Issuer: e.url, EndToken: e.streams.EndToken, Logger: quiet}
		o.oauth(&cfg)
		if oauthServer, err = oauth.New(cfg); err != nil {
			t.Fatal(err)
		}
		resource, metadataURL = oauthServer.Resource(), oauthServer.ResourceMetadataURL()
	}
	e.mcp = hmcp.New(hmcp.Config{Auth: a, Sandboxes: sandboxes, Streams: e.streams, Processes: e.procs, KeepAlive: o.keepAlive, Logger: quiet,
		SessionIdle: o.sessionIdle, SessionsPerToken: o.sessionsPerToken, Recheck: recheck, Turns: e.turns, Watches: watches, Clock: o.clock,
		Resource: resource, ResourceMetadataURL: metadataURL, MaxBodyBytes: o.maxBody})
	mcpRechecked := make(chan struct{})
	go func() { e.mcp.Run(rechecks); close(mcpRechecked) }()
	t.Cleanup(func() { stopRechecks(); <-mcpRechecked })
	srv := rest.New(rest.Config{Auth: a, Ready: s.Ping, Sandboxes: sandboxes, Streams: e.streams, Processes: e.procs, Turns: e.turns, Registry: reg, MCP: e.mcp, Logger: quiet,
		OAuth: oauthServer, MaxBodyBytes: o.maxBody})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.streams.Shutdown()
		e.mcp.Shutdown(ctx)
		srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		e.http.CloseIdleConnections()
	})
	return e
}

// do makes a REST request and decodes its JSON answer.
func (e *env) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return resp.StatusCode, out
}

func (e *env) newToken(t *testing.T, body string) (id, secret string) {
	t.Helper()
	status, out := e.do(t, "POST", "/api/tokens", e.admin, body)
	if status != http.StatusCreated {
		t.Fatalf("POST /api/tokens %s = %d %v", body, status, out)
	}
	return out["id"].(string), out["token"].(string)
}

func (e *env) sandbox(t *testing.T, token, name, extra string) {
	t.Helper()
	if status, out := e.do(t, "POST", "/api/sandboxes", token, `{"name": "`+name+`"`+extra+`}`); status != http.StatusCreated {
		t.Fatalf("create %s = %d %v", name, status, out)
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// progress is one notifications/progress a client got.
type progress struct {
	token    any
	value    float64
	message  string
	encoding string
}

// client is an MCP client session of one era, collecting the progress notifications it gets.
type client struct {
	session  *mcp.ClientSession
	progress chan progress
}

func (e *env) connect(t *testing.T, token, version string) *client {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, e.http.Transport}}, MaxRetries: -1}
	return e.connectWith(t, tr, version)
}

// connectWith connects over tr.
func (e *env) connectWith(t *testing.T, tr *mcp.StreamableClientTransport, version string) *client {
	t.Helper()
	c := &client{progress: make(chan progress, 1000)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "hangar-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p := progress{token: req.Params.ProgressToken, value: req.Params.Progress, message: req.Params.Message}
			p.encoding, _ = req.Params.Meta["hangar.dev/encoding"].(string)
			c.progress <- p
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { s.Close() })
	if got := s.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	c.session = s
	return c
}

// call is a tool call under way.
type call struct {
	done   chan struct{}
	res    *mcp.CallToolResult
	err    error
	cancel context.CancelFunc
}

var nextToken struct {
	sync.Mutex
	n int
}

// start calls exec in the background, with a progress token when stream is set.
func (c *client) start(args map[string]any, stream bool) *call {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	params := &mcp.CallToolParams{Name: "exec", Arguments: args}
	if stream {
		args["stream"] = true
		nextToken.Lock()
		nextToken.n++
		params.SetProgressToken("p" + strconv.Itoa(nextToken.n))
		nextToken.Unlock()
	}
	k := &call{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(k.done)
		k.res, k.err = c.session.CallTool(ctx, params)
	}()
	return k
}

func (k *call) wait(t *testing.T) *mcp.CallToolResult {
	t.Helper()
	<-k.done
	k.cancel()
	if k.err != nil {
		t.Fatalf("call exec: %v", k.err)
	}
	return k.res
}

func (k *call) finished() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// nextProgress waits for the next progress notification of call k; it fails the test when
// the call ends without one.
func (c *client) nextProgress(t *testing.T, k *call) progress {
	t.Helper()
	select {
	case p := <-c.progress:
		return p
	case <-k.done:
		// The SDK's client runs notification handlers on their own goroutine: one that came
		// before the result may still be running when the call returns. The call is over, so
		// end the session, which waits for those handlers.
		c.session.Close()
		select {
		case p := <-c.progress:
			return p
		default:
		}
		t.Fatalf("the call ended without progress: %+v %v", k.res, k.err)
	case <-time.After(callTimeout):
		t.Fatal("no progress notification")
	}
	return progress{}
}

// structured decodes a result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

// errorText is a tool error's text; it fails the test when res is not a tool error.
func errorText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("result is not a tool error: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("tool error content is %T", res.Content[0])
	}
	return tc.Text
}

// pidOf waits for a command to write its pid to file.
func pidOf(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", file)
	return 0
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleeper is a command that records its child's pid, says it started and waits.
func sleeper(pidFile string) string {
	return "sleep 300 & echo $! > " + pidFile + "; echo started; wait"
}
