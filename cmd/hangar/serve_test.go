package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// built is the hangar-envd the tests that run local sandboxes (with daemons) share: built
// (providertest.SharedEnvd) on first use, once for the package.
var built struct {
	once sync.Once
	path string
	err  error
}

// sharedEnvd returns the path of the shared hangar-envd, building it on first use.
func sharedEnvd(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.path, built.err = providertest.SharedEnvd() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// waitTimeout bounds every wait in these tests.
const waitTimeout = 20 * time.Second

type testServer struct {
	url    string
	addr   string
	cancel context.CancelFunc
	done   chan error
	stdout *providertest.SyncBuffer
	stderr *providertest.SyncBuffer
	cfg    config.Config
}

// startServe runs serve on a port-0 listener with a fresh data dir.
func startServe(t *testing.T, cfg config.Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1),
		stdout: &providertest.SyncBuffer{}, stderr: &providertest.SyncBuffer{}, cfg: cfg}
	go func() { ts.done <- serve(ctx, cfg, ln, ts.stdout, ts.stderr) }()
	t.Cleanup(func() { ts.stop(t) })
	// ln listens already, so this request waits in its backlog until serve accepts it, which
	// it does once it is ready; a serve that fails closes ln, which ends the request at once.
	client := &http.Client{Timeout: waitTimeout}
	resp, err := client.Get(ts.url + "/healthz")
	if err != nil {
		t.Fatalf("server did not answer /healthz: %v\n%s", err, ts.stderr.String())
	}
	resp.Body.Close()
	return ts
}

func (ts *testServer) stop(t *testing.T) error {
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- err // a second stop sees the same result
		return err
	case <-time.After(waitTimeout):
		t.Fatal("serve did not return after its context ended")
		return nil
	}
}

func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.ShutdownGrace = waitTimeout
	return cfg
}

func adminToken(t *testing.T, ts *testServer) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ts.cfg.DataDir, adminTokenFile))
	if err != nil {
		t.Fatalf("read admin token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func TestFirstStartMakesAdminToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	fi, err := os.Stat(filepath.Join(cfg.DataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode = %v, want 0600", fi.Mode().Perm())
	}
	// Standard output is no terminal here, as in a container (its log): it says where the token
	// is, and `hangar admin-token` reads it there.
	if out := ts.stdout.String(); strings.Contains(out, tok) || !strings.Contains(out, fi.Name()) || !strings.Contains(out, "hangar admin-token") {
		t.Errorf("stdout (no terminal) must name the token's file and `hangar admin-token`, never show the token: %q", out)
	}
	if strings.Contains(ts.stderr.String(), tok) {
		t.Error("the admin token is in the log")
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"admin-token", "--data-dir", cfg.DataDir}, &out, &errOut); code != 0 || strings.TrimSpace(out.String()) != tok {
		t.Errorf("hangar admin-token = %d %q %q, want the token", code, out.String(), errOut.String())
	}
	req, _ := http.NewRequest("GET", ts.url+"/api/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"admin"`) {
		t.Fatalf("GET /api/tokens = %d %s", resp.StatusCode, body)
	}
	if err := ts.stop(t); err != nil {
		t.Fatalf("serve returned %v, want nil after shutdown", err)
	}

	// A second start over the same data dir makes no new token and prints none.
	again := startServe(t, cfg)
	if strings.Contains(again.stdout.String(), "hgr_") {
		t.Errorf("second start printed a token: %q", again.stdout.String())
	}
	if adminToken(t, again) != tok {
		t.Error("second start replaced the admin token file")
	}
}

func TestReadyzAndMetrics(t *testing.T) {
	t.Parallel()
	ts := startServe(t, testConfig(t))
	for path, want := range map[string]string{
		"/readyz":  `"ready"`,
		"/healthz": `"ok"`,
		"/metrics": "go_goroutines",
	} {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"process_resident_memory_bytes", `hangar_http_requests_total{code="200",method="GET",route="/readyz"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestServeSaysWhereThePageIs: serve's first line names the Fleet page's address, which opens.
func TestServeSaysWhereThePageIs(t *testing.T) {
	t.Parallel()
	ts := startServe(t, testConfig(t))
	m := regexp.MustCompile(`msg="hangar serving" .*fleet=(\S+)`).FindStringSubmatch(ts.stderr.String())
	if m == nil || m[1] != ts.url+"/fleet/" {
		t.Fatalf("serve's log does not name the page at %s/fleet/:\n%s", ts.url, ts.stderr.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", m[1], resp.StatusCode)
	}
	for addr, want := range map[string]string{
		"0.0.0.0:8080": "http://localhost:8080/fleet/",
		"[::]:8080":    "http://localhost:8080/fleet/",
		"[::1]:9000":   "http://[::1]:9000/fleet/",
	} {
		if got := pageURL(netAddr(addr)); got != want {
			t.Errorf("pageURL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// netAddr is a net.Addr of a given text.
type netAddr string

func (a netAddr) Network() string { return "tcp" }
func (a netAddr) String() string  { return string(a) }

// TestMetricsOnOwnListener: with HANGAR_METRICS_LISTEN, /metrics answers there and no longer on
// the public listener.
func TestMetricsOnOwnListener(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MetricsListen = "127.0.0.1:0"
	ts := startServe(t, cfg)
	m := regexp.MustCompile(`msg="serving /metrics" addr=(\S+)`).FindStringSubmatch(ts.stderr.String())
	if m == nil {
		t.Fatalf("serve did not log its metrics address:\n%s", ts.stderr.String())
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(ts.url + "/metrics"); code != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics on the public listener = %d, want 404", code)
	}
	get(ts.url + "/readyz")
	if code, body := get("http://" + m[1] + "/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") ||
		!strings.Contains(body, `hangar_http_requests_total{code="200",method="GET",route="/readyz"}`) {
		t.Errorf("GET /metrics on %s = %d, want hangar's and Go's metrics:\n%s", m[1], code, body)
	}
}

// result is how a request ended.
type result struct {
	status int
	body   string
	err    error
}

// inFlight sends a POST /api/tokens whose body stops halfway, and returns once its handler is
// reading the body (the server's 100 Continue proves it runs). The test writes the rest to pw;
// results gets the answer.
func inFlight(t *testing.T, ts *testServer, tok string) (*io.PipeWriter, <-chan result) {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", ts.url+"/api/tokens", pr)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Expect", "100-continue")
	reading := make(chan struct{})
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got100Continue: func() { close(reading) },
	}))
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: waitTimeout}}
	t.Cleanup(client.CloseIdleConnections)
	results := make(chan result, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			results <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		results <- result{status: resp.StatusCode, body: string(b)}
	}()
	go pw.Write([]byte(`{"user": "ada", `)) // half the body: the handler waits for the rest
	select {
	case <-reading:
	case <-time.After(waitTimeout):
		t.Fatal("the request never reached its handler")
	}
	return pw, results
}

// TestGracefulShutdown: a request in flight when the signal comes finishes; a request that
// starts afterwards gets 503; serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	ts := startServe(t, testConfig(t))
	tok := adminToken(t, ts)

	// A connection opened before the shutdown, on which a request is sent after it began.
	late, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()

	// The in-flight request: its handler is reading the body when the shutdown starts.
	pw, results := inFlight(t, ts, tok)

	ts.cancel() // as SIGTERM does
	// Once new connections are refused, the shutdown has begun.
	deadline := time.Now().Add(waitTimeout)
	for {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections after the shutdown began")
		}
		time.Sleep(5 * time.Millisecond)
	}

	fmt.Fprintf(late, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	late.SetReadDeadline(time.Now().Add(waitTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(late), nil)
	if err != nil {
		t.Fatalf("read the late request's response: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request started during the shutdown got %d, want 503", resp.StatusCode)
	}

	pw.Write([]byte(`"scopes": ["user"]}`))
	pw.Close()
	r := <-results
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("the in-flight request = %d %q %v, want 201", r.status, r.body, r.err)
	}
	if err := ts.stop(t); err != nil {
		t.Fatalf("serve returned %v, want nil", err)
	}
}

func TestServeRefusesBadStartup(t *testing.T) {
	var out, errOut bytes.Buffer
	t.Setenv("HANGAR_STREAM_MAX_TOTAL", "-3")
	code := run(context.Background(), []string{"serve"}, &out, &errOut)
	if code == 0 {
		t.Fatal("serve started with a negative limit")
	}
	if lines := strings.Split(strings.TrimSpace(errOut.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "HANGAR_STREAM_MAX_TOTAL") {
		t.Errorf("stderr = %q, want one line naming the variable", errOut.String())
	}
}

// api sends a request with a token and decodes the JSON answer.
func (ts *testServer) api(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestSandboxesSurviveRestart: a local sandbox's daemon outlives the control plane, which finds
// it again at start; one whose daemon died meanwhile is marked failed, with the reason.
func TestSandboxesSurviveRestart(t *testing.T) {
	t.Parallel()
	bin := sharedEnvd(t)
	cfg := testConfig(t)
	cfg.Providers.DaemonBinary = bin
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	for _, name := range []string{"keeps", "dies"} {
		if code, body := ts.api(t, "POST", "/api/sandboxes", tok, `{"name": "`+name+`"}`); code != 201 {
			t.Fatalf("create %s = %d %v", name, code, body)
		}
	}
	t.Cleanup(func() {
		again := startServe(t, cfg)
		for _, name := range []string{"keeps", "dies"} {
			again.api(t, "DELETE", "/api/sandboxes/"+name, tok, "")
		}
	})
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	// The daemon of "dies" dies while no control plane runs. pkill only sends the signal: wait
	// until no such process is left, or the next serve may still find it answering.
	pattern := filepath.Join(cfg.DataDir, "sandboxes", "dies") + "/"
	out, err := exec.Command("pkill", "-KILL", "-f", pattern).CombinedOutput()
	if err != nil {
		t.Fatalf("pkill the daemon of dies: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for exec.Command("pgrep", "-f", pattern).Run() == nil { // exit status 1: none left
		select {
		case <-ctx.Done():
			t.Fatalf("the daemon of dies is still running after pkill -KILL")
		case <-time.After(10 * time.Millisecond):
		}
	}

	ts = startServe(t, cfg)
	code, body := ts.api(t, "POST", "/api/sandboxes/keeps/exec", tok, `{"command": "echo still here"}`)
	if code != 200 || body["stdout"] != "still here\n" || body["via"] != "daemon" {
		t.Fatalf("exec after restart = %d %v", code, body)
	}
	code, body = ts.api(t, "GET", "/api/sandboxes/dies", tok, "")
	if code != 200 || body["state"] != "failed" || body["reason"] == "" {
		t.Fatalf("the sandbox whose daemon died = %d %v, want failed with a reason", code, body)
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestProcessesAdoptedAfterRestart: a background process keeps running in a local sandbox while
// the control plane restarts; its token finds it again (adopted, output from then on), another
// token does not, and a process with a forged hangar tag is never adopted.
func TestProcessesAdoptedAfterRestart(t *testing.T) {
	t.Parallel()
	bin := sharedEnvd(t)
	cfg := testConfig(t)
	cfg.Providers.DaemonBinary = bin
	ts := startServe(t, cfg)
	admin := adminToken(t, ts)
	_, created := ts.api(t, "POST", "/api/tokens", admin, `{"user": "ada", "scopes": ["user"]}`)
	tok := created["token"].(string)
	if code, body := ts.api(t, "POST", "/api/sandboxes", tok, `{"name": "box"}`); code != 201 {
		t.Fatalf("create = %d %v", code, body)
	}
	t.Cleanup(func() {
		again := startServe(t, cfg)
		again.api(t, "DELETE", "/api/sandboxes/box", tok, "")
	})
	code, body := ts.api(t, "POST", "/api/sandboxes/box/processes", tok, `{"command": "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"}`)
	if code != 201 {
		t.Fatalf("start = %d %v", code, body)
	}
	id := body["process_id"].(string)
	// A forged tag: the agent starts a process through its own daemon with a tag it made up.
	forged := "hangar:p_forged0000:" + strings.Repeat("ab", 32)
	startTagged(t, cfg, "box", forged)
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}

	ts = startServe(t, cfg)
	code, body = ts.api(t, "GET", "/api/sandboxes/box/processes", tok, "")
	if code != 200 {
		t.Fatalf("list after restart = %d %v", code, body)
	}
	procs := body["processes"].([]any)
	if len(procs) != 1 {
		t.Fatalf("after restart the token lists %v, want its one process (and not the forged one)", procs)
	}
	p := procs[0].(map[string]any)
	if p["process_id"] != id || p["adopted"] != true || p["state"] != "running" {
		t.Fatalf("adopted process = %v", p)
	}
	// Output from then on: poll until new ticks arrive.
	deadline := time.Now().Add(waitTimeout)
	for {
		_, out := ts.api(t, "GET", "/api/sandboxes/box/processes/"+id+"?since=0", tok, "")
		if s, _ := out["output"].(string); strings.Contains(s, "tick") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no output from the adopted process")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Another token of the same user does not see it; the admin does, with its owner.
	_, other := ts.api(t, "POST", "/api/tokens", admin, `{"user": "ada", "scopes": ["user"]}`)
	if code, body := ts.api(t, "GET", "/api/sandboxes/box/processes", other["token"].(string), ""); code != 200 || len(body["processes"].([]any)) != 0 {
		t.Errorf("another token lists %v", body)
	}
	if code, body := ts.api(t, "GET", "/api/sandboxes/box/processes", admin, ""); code != 200 || len(body["processes"].([]any)) != 1 ||
		body["processes"].([]any)[0].(map[string]any)["owner"] != created["id"] || body["processes"].([]any)[0].(map[string]any)["user"] != "ada" {
		t.Errorf("the admin lists %v, want the process with its owner %v", body, created["id"])
	}
	if code, _ := ts.api(t, "DELETE", "/api/sandboxes/box/processes/"+id, tok, ""); code != 202 {
		t.Errorf("kill the adopted process = %d", code)
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// startTagged starts `sleep 300` with tag in sandbox name's daemon, as an agent could through
// its own daemon, reading the daemon's address from the stopped control plane's store.
func startTagged(t *testing.T, cfg config.Config, name, tag string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.GetSandbox(context.Background(), name)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := envd.New(envd.Config{URL: sb.DaemonURL, AccessToken: sb.DaemonToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Start(context.Background(), envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: tag})
	if err != nil {
		t.Fatalf("start a forged process: %v", err)
	}
	ps.Close()
}

// restartWithProcess starts serve with a local sandbox box of user ada running a background
// process, stops serve, and returns what is needed to start it again.
func restartWithProcess(t *testing.T) (cfg config.Config, admin, tok, tokID, id string) {
	t.Helper()
	bin := sharedEnvd(t)
	cfg = testConfig(t)
	cfg.Providers.DaemonBinary = bin
	cfg.Stream.RecheckSeconds = 1
	ts := startServe(t, cfg)
	admin = adminToken(t, ts)
	_, created := ts.api(t, "POST", "/api/tokens", admin, `{"user": "ada", "scopes": ["user"]}`)
	tok, tokID = created["token"].(string), created["id"].(string)
	if code, body := ts.api(t, "POST", "/api/sandboxes", tok, `{"name": "box"}`); code != 201 {
		t.Fatalf("create = %d %v", code, body)
	}
	t.Cleanup(func() {
		again := startServe(t, cfg)
		again.api(t, "DELETE", "/api/sandboxes/box", admin, "")
		again.stop(t)
	})
	code, body := ts.api(t, "POST", "/api/sandboxes/box/processes", tok, `{"command": "while :; do sleep 0.1; done"}`)
	if code != 201 {
		t.Fatalf("start = %d %v", code, body)
	}
	id = body["process_id"].(string)
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	return cfg, admin, tok, tokID, id
}

// agentDaemon is the sandbox's daemon as a command in the sandbox could reach it, had it read
// the daemon's token: the address and token come from the stopped control plane's store.
func agentDaemon(t *testing.T, cfg config.Config, name string) *envd.Client {
	t.Helper()
	st, err := sqlite.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.GetSandbox(context.Background(), name)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := envd.New(envd.Config{URL: sb.DaemonURL, AccessToken: sb.DaemonToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// daemonTag returns the daemon's tag of hangar's process id, or "" once the daemon has none.
func daemonTag(t *testing.T, c *envd.Client, id string) (tag string, pid uint32) {
	t.Helper()
	ps, err := c.List(context.Background())
	if err != nil {
		t.Fatalf("list the daemon's processes: %v", err)
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Tag, "hangar:"+id+":") {
			return p.Tag, p.PID
		}
	}
	return "", 0
}

// waitEnded waits until hangar has recorded process id's end: its SSE stream sends the end
// and closes then (at once for a process that ended already).
func (ts *testServer) waitEnded(t *testing.T, token, id string) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.url+"/api/sandboxes/box/processes/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: waitTimeout}).Do(req)
	if err != nil {
		t.Fatalf("stream of process %s: %v", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "event: end") {
		t.Fatalf("stream of process %s = %d, %v, want its end:\n%s", id, resp.StatusCode, err, body)
	}
}

// waitGone waits until the daemon no longer runs process id: it attaches to the process and
// waits for its end.
func waitGone(t *testing.T, c *envd.Client, id, why string) {
	t.Helper()
	tag, _ := daemonTag(t, c, id)
	if tag == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := c.Connect(ctx, envd.ByTag(tag))
	if errors.Is(err, envd.ErrNotFound) {
		return // it ended more than the daemon remembers ago
	}
	if err != nil {
		t.Fatalf("attach to process %s: %v", id, err)
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) || (err == nil && ev.Kind == envd.EventEnd) {
			return
		}
		if err != nil {
			t.Fatalf("process %s still runs (%v): %s", id, err, why)
		}
	}
}

// TestImpostorWithCopiedTagNotAdopted: while the control plane is down, a command in the sandbox
// that holds the daemon's token kills a background process by its tag and starts another with
// the same tag. The restarted control plane does not adopt it (the record's pid is not its), and
// the original is listed as ended (for 10 minutes), saying another process took its tag.
func TestImpostorWithCopiedTagNotAdopted(t *testing.T) {
	t.Parallel()
	cfg, admin, tok, _, id := restartWithProcess(t)
	c := agentDaemon(t, cfg, "box")
	tag, pid := daemonTag(t, c, id)
	if tag == "" {
		t.Fatalf("the daemon does not run process %s", id)
	}
	if err := c.Signal(context.Background(), envd.ByTag(tag), envd.SIGKILL); err != nil {
		t.Fatalf("kill by tag: %v", err)
	}
	waitGone(t, c, id, "killed by its tag")
	st, err := c.Start(context.Background(), envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: tag})
	if err != nil {
		t.Fatalf("start the impostor: %v", err)
	}
	st.Close()
	if got, ipid := daemonTag(t, c, id); got != tag || ipid == pid {
		t.Fatalf("the impostor runs with tag %q and pid %d (the original had %d)", got, ipid, pid)
	}
	t.Cleanup(func() { c.Signal(context.Background(), envd.ByTag(tag), envd.SIGKILL) })

	ts := startServe(t, cfg)
	for _, who := range []string{tok, admin} {
		code, body := ts.api(t, "GET", "/api/sandboxes/box/processes", who, "")
		procs, _ := body["processes"].([]any)
		if code != 200 || len(procs) != 1 {
			t.Fatalf("after restart the list is %d %v, want the original only (the impostor is not adopted)", code, body)
		}
		p := procs[0].(map[string]any)
		if p["process_id"] != id || p["state"] != "exited" || p["adopted"] == true || !strings.Contains(fmt.Sprint(p["status"]), "took its tag") {
			t.Errorf("the original after restart: %v, want it exited, not adopted, saying another process took its tag", p)
		}
		if code, body := ts.api(t, "GET", "/api/sandboxes/box/processes/"+id, who, ""); code != 200 {
			t.Errorf("get %s = %d %v, want 200", id, code, body)
		}
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRevokedAfterRestartKillsProcess: a process started before a restart is followed again at
// start, before anyone lists it, so revoking its token kills it; the admin then sees why it ended.
func TestRevokedAfterRestartKillsProcess(t *testing.T) {
	t.Parallel()
	cfg, admin, _, tokID, id := restartWithProcess(t)
	c := agentDaemon(t, cfg, "box")
	ts := startServe(t, cfg)
	if code, body := ts.api(t, "DELETE", "/api/tokens/"+tokID, admin, ""); code != 204 && code != 200 {
		t.Fatalf("revoke = %d %v", code, body)
	}
	waitGone(t, c, id, "its token was revoked")
	ts.waitEnded(t, admin, id) // the daemon's end reaches hangar's record a moment later
	code, body := ts.api(t, "GET", "/api/sandboxes/box/processes/"+id, admin, "")
	p, _ := body["process"].(map[string]any)
	if code != 200 || p["owner"] != tokID || p["state"] != "exited" || !strings.Contains(fmt.Sprint(p["status"]), "revoked") {
		t.Errorf("the admin gets %d %v, want %s of token %s, exited because its token was revoked", code, body, id, tokID)
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestAdminKillsAnyProcess: an admin kills another token's process.
func TestAdminKillsAnyProcess(t *testing.T) {
	t.Parallel()
	cfg, admin, _, _, id := restartWithProcess(t)
	c := agentDaemon(t, cfg, "box")
	ts := startServe(t, cfg)
	if code, body := ts.api(t, "DELETE", "/api/sandboxes/box/processes/"+id, admin, ""); code != 202 {
		t.Fatalf("the admin's kill = %d %v", code, body)
	}
	waitGone(t, c, id, "the admin killed it")
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestEndedProcessNeverAdopted: hangar saw a process end (killed through the API), then, while
// hangar is down, a command in the sandbox starts another under its tag. The restarted control
// plane does not adopt it: the record says the process ended, and it is listed as it ended.
func TestEndedProcessNeverAdopted(t *testing.T) {
	t.Parallel()
	cfg, _, tok, _, id := restartWithProcess(t)
	ts := startServe(t, cfg)
	c := agentDaemon(t, cfg, "box")
	tag, _ := daemonTag(t, c, id)
	if code, body := ts.api(t, "DELETE", "/api/sandboxes/box/processes/"+id, tok, ""); code != 202 {
		t.Fatalf("kill = %d %v", code, body)
	}
	ts.waitEnded(t, tok, id)
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	st, err := c.Start(context.Background(), envd.StartRequest{Cmd: "sleep", Args: []string{"300"}, Tag: tag})
	if err != nil {
		t.Fatalf("start the impostor: %v", err)
	}
	st.Close()
	t.Cleanup(func() { c.Signal(context.Background(), envd.ByTag(tag), envd.SIGKILL) })
	ts = startServe(t, cfg)
	code, body := ts.api(t, "GET", "/api/sandboxes/box/processes", tok, "")
	if procs, _ := body["processes"].([]any); code != 200 || len(procs) != 1 || procs[0].(map[string]any)["state"] != "exited" || procs[0].(map[string]any)["adopted"] == true {
		t.Errorf("after restart the list is %d %v, want the process as it ended, not adopted", code, body)
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestLocalProviderOff: with HANGAR_LOCAL_PROVIDER=false (the Helm chart's setting) a request
// for a local sandbox is refused with the variable that turns it on, and a default provider of
// local stops start-up.
func TestLocalProviderOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.Providers.Local = false
	cfg.Providers.Default = "docker"
	ts := startServe(t, cfg)
	code, body := ts.api(t, "POST", "/api/sandboxes", adminToken(t, ts), `{"name": "here", "provider": "local"}`)
	if msg, _ := json.Marshal(body); code != http.StatusBadRequest || !strings.Contains(string(msg), "HANGAR_LOCAL_PROVIDER") {
		t.Fatalf("create a local sandbox with the provider off = %d %s, want 400 naming HANGAR_LOCAL_PROVIDER", code, msg)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "sandboxes", "here")); err == nil {
		t.Errorf("the refused local sandbox has a folder")
	}

	cfg = testConfig(t)
	cfg.Providers.Local = false
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut providertest.SyncBuffer
	err = serve(context.Background(), cfg, ln, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "HANGAR_DEFAULT_PROVIDER=local") || !strings.Contains(err.Error(), "HANGAR_LOCAL_PROVIDER=false") {
		t.Fatalf("serve with the default provider turned off: %v", err)
	}
}
