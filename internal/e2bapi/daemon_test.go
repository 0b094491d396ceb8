package e2bapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
	fsrpc "github.com/hangar-dev/hangar/internal/envd/spec/filesystem"
	"github.com/hangar-dev/hangar/internal/envd/spec/filesystem/filesystemconnect"
	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
	"github.com/hangar-dev/hangar/internal/envd/spec/process/processconnect"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

var (
	ada = auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	bob = auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
)

// fakeGrants stands for h1's Grants: each access token is one grant; a sandbox id is the
// sandbox's name.
type fakeGrants struct {
	byToken map[string]Grant
	names   map[string]bool // the sandboxes there are
}

func (f *fakeGrants) Mint(context.Context, auth.Principal, string) (string, error) {
	return "", errors.New("not in these tests")
}

func (f *fakeGrants) Check(_ context.Context, id, token string) (Grant, error) {
	g, ok := f.byToken[token]
	switch {
	case !f.names[id]:
		return Grant{}, ErrNoSandbox
	case !ok:
		return Grant{}, ErrAccessDenied
	case g.Sandbox.Name != id:
		return Grant{}, ErrNoSandbox // another user's sandbox, as far as this token goes
	}
	return g, nil
}

// runningProvider says every sandbox runs.
type runningProvider struct{ provider.Provider }

func (runningProvider) Name() string { return "local" }

// env is the pass-through served at url+"/e2b/sandbox" over a real hangar daemon (in process,
// its own access token "secret", working directory dir) of two sandboxes: ada's "box" (access
// token "ada-grant") and bob's "bobs" ("bob-grant").
type env struct {
	url     string
	dir     string
	streams *stream.Registry
	reg     *prometheus.Registry
	served  chan string // the path of each call the handler has finished with
}

func newEnv(t *testing.T, scfg stream.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.New(daemon.Config{AccessToken: "secret", Workdir: dir}).Serve(dctx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sbs := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": runningProvider{}}})
	t.Cleanup(sbs.Close)
	now := time.Now()
	daemonURL := "http://" + ln.Addr().String()
	box := store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true, Workdir: dir,
		DaemonURL: daemonURL, DaemonToken: "secret", CreatedAt: now, UpdatedAt: now}
	bobs := box
	bobs.Name, bobs.Owner = "bobs", "bob"
	grants := &fakeGrants{
		byToken: map[string]Grant{"ada-grant": {Principal: ada, Sandbox: box}, "bob-grant": {Principal: bob, Sandbox: bobs}},
		names:   map[string]bool{"box": true, "bobs": true},
	}
	e := &env{dir: dir, reg: prometheus.NewRegistry(), served: make(chan string, 64)}
	scfg.Registerer = e.reg
	e.streams = stream.New(scfg)
	h := http.StripPrefix("/e2b/sandbox", NewDaemon(DaemonConfig{Grants: grants, Daemons: sbs, Streams: e.streams}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { e.served <- r.URL.Path }()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(e.streams.Shutdown)
	e.url = srv.URL + "/e2b/sandbox"
	return e
}

// client is an HTTP client that sends E2B's SDK's headers: the sandbox id and access token.
func client(id, token string) *http.Client {
	return &http.Client{Transport: sdkHeaders{id: id, token: token, next: http.DefaultTransport}}
}

type sdkHeaders struct {
	id, token string
	next      http.RoundTripper
}

func (h sdkHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("E2b-Sandbox-Port", "49983")
	if h.token != "" {
		r.Header.Set("X-Access-Token", h.token)
	}
	return h.next.RoundTrip(r)
}

// procs is ada's process client of box, in JSON (as E2B's SDKs speak) or binary.
func (e *env) procs(json bool) processconnect.ProcessClient {
	var opts []connect.ClientOption
	if json {
		opts = append(opts, connect.WithProtoJSON())
	}
	return processconnect.NewProcessClient(client("box", "ada-grant"), e.url, opts...)
}

// start starts a shell command in box through the pass-through and returns its stream, past
// the start event, and the pid.
func (e *env) start(ctx context.Context, t *testing.T, script string) (*connect.ServerStreamForClient[rpc.StartResponse], uint32) {
	t.Helper()
	st, err := e.procs(true).Start(ctx, connect.NewRequest(&rpc.StartRequest{
		Process: &rpc.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}, Stdin: proto.Bool(true)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if !st.Receive() {
		t.Fatalf("no start event: %v", st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		t.Fatalf("the first event is %v, not the start", st.Msg())
	}
	return st, pid
}

// stdoutUntil reads the stream until its stdout so far ends with want, and fails past its end.
func stdoutUntil(t *testing.T, st *connect.ServerStreamForClient[rpc.StartResponse], want string) {
	t.Helper()
	var got strings.Builder
	for !strings.HasSuffix(got.String(), want) {
		if !st.Receive() {
			t.Fatalf("the stream ended (%v) with stdout %q, before %q", st.Err(), got.String(), want)
		}
		got.Write(st.Msg().GetEvent().GetData().GetStdout())
	}
}

// waitEnded waits until the process pid has ended: Connect to it gives its end (or finds it
// gone).
func (e *env) waitEnded(ctx context.Context, t *testing.T, pid uint32) {
	t.Helper()
	st, err := e.procs(true).Connect(ctx, connect.NewRequest(&rpc.ConnectRequest{
		Process: &rpc.ProcessSelector{Selector: &rpc.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for st.Receive() {
		if st.Msg().GetEvent().GetEnd() != nil {
			return
		}
	}
	if connect.CodeOf(st.Err()) != connect.CodeNotFound {
		t.Fatalf("connect to the process %d: %v, want its end or not_found", pid, st.Err())
	}
}

// TestStartPID: the pid of a Start's first message, in both codecs.
func TestStartPID(t *testing.T) {
	t.Parallel()
	msg := &rpc.StartResponse{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Start{Start: &rpc.ProcessEvent_StartEvent{Pid: 4242}}}}
	bin, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	data := &rpc.StartResponse{Event: &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Stdout{Stdout: []byte("x")}}}}}
	other, _ := proto.Marshal(data)
	for _, c := range []struct {
		data []byte
		json bool
		want uint32
	}{{bin, false, 4242}, {js, true, 4242}, {other, false, 0}, {[]byte("{"), true, 0}, {[]byte{0xff}, false, 0}} {
		if got := startPID(c.data, c.json); got != c.want {
			t.Errorf("startPID(%q, json %v) = %d, want %d", c.data, c.json, got, c.want)
		}
	}
}

// waitServed waits until the handler has finished with a call of path.
func (e *env) waitServed(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	for {
		select {
		case p := <-e.served:
			if strings.HasSuffix(p, path) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the call of %s did not end", path)
		}
	}
}

func (e *env) closed(t *testing.T, reason stream.Reason) float64 {
	return metric(t, e.reg, "hangar_streams", map[string]string{"kind": "e2b", "reason": string(reason)})
}

// TestUnaryBothCodecs: a unary call passes to the daemon with the daemon's own token (the
// daemon refuses any other), in JSON and in binary.
func TestUnaryBothCodecs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := os.WriteFile(filepath.Join(e.dir, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, json := range []bool{true, false} {
		var opts []connect.ClientOption
		if json {
			opts = append(opts, connect.WithProtoJSON())
		}
		fs := filesystemconnect.NewFilesystemClient(client("box", "ada-grant"), e.url, opts...)
		res, err := fs.ListDir(ctx, connect.NewRequest(&fsrpc.ListDirRequest{Path: e.dir}))
		if err != nil {
			t.Fatalf("json %v: %v", json, err)
		}
		if len(res.Msg.GetEntries()) != 1 || res.Msg.GetEntries()[0].GetName() != "hello.txt" {
			t.Errorf("json %v: listed %v, want hello.txt", json, res.Msg.GetEntries())
		}
	}
	res, err := client("box", "ada-grant").Get(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("/health answered %d, want 204", res.StatusCode)
	}
}

// TestStartStreamsAsPrinted: a Start's output reaches the client as the command prints it:
// the command waits for input the test sends only once the first line arrived.
func TestStartStreamsAsPrinted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st, pid := e.start(ctx, t, "echo first; read x; echo second $x")
	if got := metric(t, e.reg, "hangar_streams_open", map[string]string{"kind": "e2b"}); got != 1 {
		t.Errorf("hangar_streams_open{kind=e2b} = %v while the Start runs, want 1", got)
	}
	stdoutUntil(t, st, "first\n")
	if _, err := e.procs(false).SendInput(ctx, connect.NewRequest(&rpc.SendInputRequest{
		Process: &rpc.ProcessSelector{Selector: &rpc.ProcessSelector_Pid{Pid: pid}},
		Input:   &rpc.ProcessInput{Input: &rpc.ProcessInput_Stdin{Stdin: []byte("go\n")}}})); err != nil {
		t.Fatal(err)
	}
	stdoutUntil(t, st, "second go\n")
	for st.Receive() {
		if end := st.Msg().GetEvent().GetEnd(); end != nil && end.GetExitCode() != 0 {
			t.Errorf("exit code %d", end.GetExitCode())
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	e.waitServed(ctx, t, "/process.Process/Start")
	if got := e.closed(t, stream.ReasonDone); got != 1 {
		t.Errorf("hangar_streams{kind=e2b,reason=done} = %v, want 1", got)
	}
	if got := metric(t, e.reg, "hangar_stream_bytes", map[string]string{"kind": "e2b"}); got <= 0 {
		t.Errorf("hangar_stream_bytes{kind=e2b} = %v, want the bytes passed", got)
	}
}

// TestFilesUpAndDown: a large file goes up (streamed from a pipe, no Content-Length) and comes
// down whole through the pass-through.
func TestFilesUpAndDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{})
	const size = 32 << 20
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	pr, pw := io.Pipe()
	sum := sha256.New()
	go func() {
		for n := 0; n < size; n += len(chunk) {
			sum.Write(chunk)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	c := client("box", "ada-grant")
	req, err := http.NewRequest(http.MethodPost, e.url+"/files?path=big.bin", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload answered %d", res.StatusCode)
	}
	want := sum.Sum(nil)
	res, err = c.Get(e.url + "/files?path=big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got := sha256.New()
	n, err := io.Copy(got, res.Body)
	if err != nil || n != size || !bytes.Equal(got.Sum(nil), want) {
		t.Errorf("downloaded %d bytes (%v), want the %d uploaded", n, err, size)
	}
}

// TestWatchDir: a WatchDir passes through and sends the directory's events.
func TestWatchDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	fs := filesystemconnect.NewFilesystemClient(client("box", "ada-grant"), e.url, connect.WithProtoJSON())
	st, err := fs.WatchDir(ctx, connect.NewRequest(&fsrpc.WatchDirRequest{Path: e.dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	if err := os.WriteFile(filepath.Join(e.dir, "new.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		if !st.Receive() {
			t.Fatalf("the watch ended: %v", st.Err())
		}
		if ev := st.Msg().GetFilesystem(); ev != nil && ev.GetName() == "new.txt" && ev.GetType() == fsrpc.EventType_EVENT_TYPE_CREATE {
			return
		}
	}
}

// TestRefused: the calls hangar does not pass on, and what E2B's SDK reads in each answer.
func TestRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, c := range []struct {
		name, id, token string
		status          int
		code            connect.Code
	}{
		{"no token", "box", "", http.StatusUnauthorized, connect.CodeUnauthenticated},
		{"a forged token", "box", "ada-grant-forged", http.StatusUnauthorized, connect.CodeUnauthenticated},
		{"the daemon's own token", "box", "secret", http.StatusUnauthorized, connect.CodeUnauthenticated},
		{"another user's sandbox", "bobs", "ada-grant", http.StatusBadGateway, connect.CodeUnavailable},
		{"no such sandbox", "nope", "ada-grant", http.StatusBadGateway, connect.CodeUnavailable},
	} {
		fs := filesystemconnect.NewFilesystemClient(client(c.id, c.token), e.url, connect.WithProtoJSON())
		_, err := fs.ListDir(ctx, connect.NewRequest(&fsrpc.ListDirRequest{Path: e.dir}))
		if connect.CodeOf(err) != c.code {
			t.Errorf("%s: ListDir gave %v, want %v", c.name, err, c.code)
		}
		res, err := client(c.id, c.token).Get(e.url + "/files?path=" + e.dir)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != c.status || body.Code != c.status || body.Message == "" {
			t.Errorf("%s: GET /files answered %d %+v, want %d with a sentence", c.name, res.StatusCode, body, c.status)
		}
	}
}

// TestLimitRefusesStream: a streaming call past the token's limit is refused with
// resource_exhausted (E2B's SDK: RateLimitError) and a sentence naming the limit.
func TestLimitRefusesStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stream.Config{MaxPerToken: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	e.start(ctx, t, "read x")
	st, err := e.procs(true).Start(ctx, connect.NewRequest(&rpc.StartRequest{Process: &rpc.ProcessConfig{Cmd: "true"}}))
	if err == nil {
		defer st.Close()
		for st.Receive() {
			t.Errorf("a refused Start sent %v", st.Msg())
		}
		err = st.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("the second Start gave %v, want resource_exhausted naming HANGAR_STREAM_MAX_PER_TOKEN", err)
	}
	// A file's transfer counts too: envd's error shape, 429, which E2B's SDK raises as its
	// RateLimitError.
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/files?path=x", nil)
	resp, err := client("box", "ada-grant").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), `"code":429`) || !strings.Contains(string(raw), "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("a download past the limit = %d %s, want 429 naming HANGAR_STREAM_MAX_PER_TOKEN", resp.StatusCode, raw)
	}
}

// TestStreamEnds: an open Start ends, with a Connect error saying why, when its token is
// revoked (its process killed, as a revoked token's streamed command), its sandbox destroyed or
// hangar shuts down (its process left running, as E2B's envd leaves it when a stream ends); the
// reason is in the metrics.
func TestStreamEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reason stream.Reason
		end    func(*stream.Registry)
		code   connect.Code
		killed bool
	}{
		{stream.ReasonRevoked, func(r *stream.Registry) { r.EndToken(ada.TokenID) }, connect.CodeUnauthenticated, true},
		{stream.ReasonDestroyed, func(r *stream.Registry) { r.EndSandbox("box", stream.ReasonDestroyed) }, connect.CodeUnavailable, false},
		{stream.ReasonShutdown, (*stream.Registry).Shutdown, connect.CodeUnavailable, false},
	} {
		t.Run(string(c.reason), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, stream.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			st, pid := e.start(ctx, t, "echo first; read x")
			stdoutUntil(t, st, "first\n")
			c.end(e.streams)
			for st.Receive() {
			}
			if err := st.Err(); connect.CodeOf(err) != c.code || !strings.Contains(err.Error(), "closed") {
				t.Errorf("the stream ended with %v, want %v saying it is closed", err, c.code)
			}
			e.waitServed(ctx, t, "/process.Process/Start")
			if got := e.closed(t, c.reason); got != 1 {
				t.Errorf("hangar_streams{kind=e2b,reason=%s} = %v, want 1", c.reason, got)
			}
			if c.killed {
				e.waitEnded(ctx, t, pid)
				return
			}
			list, err := e.procs(false).List(ctx, connect.NewRequest(&rpc.ListRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(list.Msg.GetProcesses(), func(p *rpc.ProcessInfo) bool { return p.GetPid() == pid }) {
				t.Errorf("the process %d is gone, want it left running", pid)
			}
		})
	}
}

// metric is the value of the series of a counter or gauge with labels in reg (0: none yet).
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}
