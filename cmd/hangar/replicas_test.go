package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// metricsOf returns a server's /metrics.
func metricsOf(t *testing.T, ts *testServer) string {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestReplicasOnlyWithPostgres: with SQLite nothing of several replicas runs (no lease
// metrics, no log line); with PostgreSQL a serve is one of the replicas on its database.
func TestReplicasOnlyWithPostgres(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		ts := startServe(t, testConfig(t))
		if m := metricsOf(t, ts); strings.Contains(m, "hangar_leases_held") {
			t.Error("a SQLite serve exports hangar_leases_held")
		}
		if strings.Contains(ts.stderr.String(), "one of several replicas") {
			t.Error("a SQLite serve joined replicas")
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t)
		cfg.DatabaseURL = storetest.FreshSchema(t, storetest.PostgresURL(t))
		ts := startServe(t, cfg)
		m := metricsOf(t, ts)
		for _, want := range []string{"hangar_leases_held 0", "hangar_lease_losses_total 0"} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if !strings.Contains(ts.stderr.String(), "one of several replicas") {
			t.Error("a PostgreSQL serve did not say it is one of several replicas")
		}
	})
}

// balancer is a load balancer in front of two replicas, as an http.RoundTripper: it sends a
// request without an Mcp-Session-Id (the initialize) to first, and those with one as its mode
// says, with the bearer token; it reports each answer's method, replica and status on hops.
type balancer struct {
	token       string
	first, rest string
	hops        chan hop

	mu   sync.Mutex // guards mode and n
	mode route
	n    int // the session's requests sent in toAlternate
}

// route is where a balancer sends a session's requests.
type route int

const (
	toRest      route = iota // all to rest
	toFirst                  // all to first
	toAlternate              // rest, first, rest, ...
)

// hop is a request the balancer passed and the status it got.
type hop struct {
	method, to string
	status     int
}

func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	to := b.first
	if r.Header.Get("Mcp-Session-Id") != "" {
		switch b.mode {
		case toRest:
			to = b.rest
		case toAlternate:
			if b.n%2 == 0 {
				to = b.rest
			}
			b.n++
		}
	}
	b.mu.Unlock()
	u, _ := url.Parse(to)
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, ""
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		b.hops <- hop{method: r.Method, to: to, status: resp.StatusCode}
	}
	return resp, err
}

// send sets where the balancer sends the session's requests from now on.
func (b *balancer) send(m route) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mode = m
}

// waitHop waits for the balancer to pass a request of method to to, and returns its status.
func (b *balancer) waitHop(t *testing.T, method, to string) int {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case h := <-b.hops:
			if h.method == method && h.to == to {
				return h.status
			}
		case <-timeout:
			t.Fatalf("no %s reached %s", method, to)
		}
	}
}

// rawMCP sends one 2025-era JSON-RPC message in session sid (none: "") to a replica's /mcp,
// and returns the status and body.
func rawMCP(t *testing.T, base, token, sid, body string) (int, string) {
	t.Helper()
	code, b, _ := rawMCPSession(t, base, token, sid, body)
	return code, b
}

// rawMCPSession is rawMCP that also returns the answer's Mcp-Session-Id.
func rawMCPSession(t *testing.T, base, token, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s/mcp: %v", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Mcp-Session-Id")
}

// TestMCPSessionOnAnyReplica: a 2025-era MCP session opened on replica A is usable through
// replica B, as behind a load balancer that spreads requests: B forwards its POSTs (a streamed
// exec's progress included), its GET stream and its DELETE to A. A session id naming a replica
// that does not exist is unknown (404) like any unknown session, and another token is refused
// A's session through B as on A itself, with the same answer.
func TestMCPSessionOnAnyReplica(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DatabaseURL = storetest.FreshSchema(t, storetest.PostgresURL(t))
	cfg.Providers.DaemonBinary = sharedEnvd(t)
	a := startServe(t, cfg)
	b := startServe(t, cfg) // the same database and data dir: the same tokens, sandboxes and secret
	admin := adminToken(t, a)
	if code, body := a.api(t, "POST", "/api/sandboxes", admin, `{"name": "hop"}`); code != 201 {
		t.Fatalf("create = %d %v", code, body)
	}
	t.Cleanup(func() { b.api(t, "DELETE", "/api/sandboxes/hop", admin, "") })
	code, other := a.api(t, "POST", "/api/tokens", admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	if code != 201 {
		t.Fatalf("create token = %d %v", code, other)
	}

	lb := &balancer{token: admin, first: a.url, rest: b.url, hops: make(chan hop, 1000)}
	progress := make(chan string, 100)
	cl := mcp.NewClient(&mcp.Implementation{Name: "behind-a-balancer", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params.Message
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", HTTPClient: &http.Client{Transport: lb}, MaxRetries: -1}
	session, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect through the balancer: %v", err)
	}
	defer session.Close()
	sid := session.ID()
	if got := lb.waitHop(t, "POST", a.url); got != http.StatusOK {
		t.Fatalf("initialize on A = %d", got)
	}
	if got := lb.waitHop(t, "GET", b.url); got != http.StatusOK {
		t.Errorf("the session's GET stream through B = %d, want 200", got)
	}

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list through B: %v", err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "exec" }) {
		t.Errorf("tools/list through B lacks exec")
	}
	streamedExec := func(via string) {
		t.Helper()
		params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"sandbox": "hop", "command": "for i in 1 2 3; do echo line $i; done", "stream": true}}
		params.SetProgressToken(via)
		res, err := session.CallTool(ctx, params)
		if err != nil || res.IsError {
			t.Fatalf("exec %s: %v %+v", via, err, res)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "line 3\n") {
			select {
			case m := <-progress:
				out.WriteString(m)
			case <-ctx.Done():
				t.Fatalf("progress %s: %q, want lines 1 to 3", via, out.String())
			}
		}
		if want := "line 1\nline 2\nline 3\n"; out.String() != want {
			t.Errorf("progress %s = %q, want %q", via, out.String(), want)
		}
	}
	streamedExec("through B")
	// The same session on A itself, then spread over both.
	lb.send(toFirst)
	if _, err := session.ListTools(ctx, nil); err != nil {
		t.Errorf("tools/list on A: %v", err)
	}
	lb.send(toAlternate)
	for i := range 4 {
		if _, err := session.ListTools(ctx, nil); err != nil {
			t.Errorf("tools/list %d, alternating: %v", i, err)
		}
		streamedExec("alternating")
	}
	lb.send(toRest)

	// Another token, through B and on A: the same refusal, word for word.
	const list = `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	onA, bodyA := rawMCP(t, a.url, other["token"].(string), sid, list)
	viaB, bodyB := rawMCP(t, b.url, other["token"].(string), sid, list)
	if onA != http.StatusForbidden || viaB != onA || bodyB != bodyA {
		t.Errorf("another token's request in A's session: on A %d %s, through B %d %s; want the same 403", onA, bodyA, viaB, bodyB)
	}
	// An unknown session of A's (forwarded) and one of a replica that never was (answered by B):
	// the same 404, word for word.
	holder, _, _ := strings.Cut(sid, ".")
	unknownA, bodyUnknown := rawMCP(t, b.url, admin, holder+".NOSUCHSESSIONAAAAAAAAAAAAA", list)
	forged, bodyForged := rawMCP(t, b.url, admin, "r_nosuchreplica.NOSUCHSESSIONAAAAAAAAAAAAA", list)
	if unknownA != http.StatusNotFound || forged != unknownA || bodyForged != bodyUnknown || !strings.Contains(bodyForged, "no such MCP session") {
		t.Errorf("unknown session of A through B: %d %s; of no replica: %d %s; want the same 404", unknownA, bodyUnknown, forged, bodyForged)
	}

	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if got := lb.waitHop(t, "DELETE", b.url); got != http.StatusNoContent {
		t.Errorf("DELETE through B = %d, want 204", got)
	}
	if code, body := rawMCP(t, a.url, admin, sid, list); code != http.StatusNotFound {
		t.Errorf("A still serves the session B deleted: %d %s", code, body)
	}

	// A session of a replica that has stopped: B answers it as unknown, so the client
	// initializes a new one.
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	code, body, left := rawMCPSession(t, a.url, admin, "", initialize)
	if code != http.StatusOK || left == "" {
		t.Fatalf("initialize on A = %d %s, session %q", code, body, left)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if code, body := rawMCP(t, b.url, admin, left, list); code != http.StatusNotFound || body != bodyUnknown {
		t.Errorf("a session of a stopped replica through B = %d %s, want the 404 of an unknown session", code, body)
	}

	// A replica still listed alive that does not answer (killed a moment ago): the same 404.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO replicas (id, url, started_at, seen_at) VALUES ('r_killed', $1, now(), now())`, dead); err != nil {
		t.Fatal(err)
	}
	if code, body := rawMCP(t, b.url, admin, "r_killed.NOSUCHSESSIONAAAAAAAAAAAAA", list); code != http.StatusNotFound || body != bodyUnknown {
		t.Errorf("a session of a replica that does not answer, through B = %d %s, want the 404 of an unknown session", code, body)
	}
}
