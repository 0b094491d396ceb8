package daemon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// The tests of this file fix the wire format: raw Connect requests with the JSON codec, as
// E2B's SDKs send them, and the exact JSON shapes of the answers.

// streamReader reads a response's envelopes.
type streamReader struct {
	t   *testing.T
	res *http.Response
}

// next returns the next message, which must not be the end of the stream.
func (s streamReader) next() map[string]any {
	s.t.Helper()
	env, err := readEnvelope(s.res.Body)
	if err != nil {
		s.t.Fatalf("read envelope: %v", err)
	}
	if env.flags != 0 {
		s.t.Fatalf("got flags %#x (%s), want a message", env.flags, env.data)
	}
	return jsonMap(s.t, env.data)
}

// end returns the end-of-stream message, which must come next and be the last.
func (s streamReader) end() map[string]any {
	s.t.Helper()
	env, err := readEnvelope(s.res.Body)
	if err != nil {
		s.t.Fatalf("read envelope: %v", err)
	}
	if env.flags != flagEndStream {
		s.t.Fatalf("got flags %#x (%s), want the end of the stream", env.flags, env.data)
	}
	if _, err := readEnvelope(s.res.Body); err != io.EOF {
		s.t.Fatalf("after the end of the stream: %v", err)
	}
	return jsonMap(s.t, env.data)
}

func open(t *testing.T, res *http.Response) streamReader {
	t.Helper()
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/connect+json" {
		t.Fatalf("content type %q", ct)
	}
	return streamReader{t: t, res: res}
}

func wantJSON(t *testing.T, what string, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := jsonUnmarshal(want, &w); err != nil {
		t.Fatalf("bad expectation %s: %v", want, err)
	}
	if g, ws := canonical(t, got), canonical(t, w); g != ws {
		t.Errorf("%s:\n got %s\nwant %s", what, g, ws)
	}
}

func TestProtocolStart(t *testing.T) {
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	s := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil,
		`{"process":{"cmd":"sh","args":["-c","printf 'a\\377'; sleep 0.2; printf e >&2; exit 3"]},"stdin":false}`))
	start := s.next()
	pid, ok := start["event"].(map[string]any)["start"].(map[string]any)["pid"].(float64)
	if !ok || pid <= 0 {
		t.Fatalf("start event: %v", start)
	}
	wantJSON(t, "stdout", s.next(), `{"event":{"data":{"stdout":"Yf8="}}}`)
	wantJSON(t, "stderr", s.next(), `{"event":{"data":{"stderr":"ZQ=="}}}`)
	wantJSON(t, "end", s.next(), `{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}`)
	wantJSON(t, "end of stream", s.end(), `{}`)

	// A bad request ends the stream with a Connect error and a sentence.
	s = open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"true","cwd":"/no/such/dir"}}`))
	e := s.end()
	errObj, _ := e["error"].(map[string]any)
	if errObj["code"] != "invalid_argument" || !strings.Contains(errObj["message"].(string), "/no/such/dir") {
		t.Errorf("missing cwd: %v", e)
	}
	s = open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":`))
	if code := s.end()["error"].(map[string]any)["code"]; code != "invalid_argument" {
		t.Errorf("malformed JSON: code %v", code)
	}
}

// TestRunningIsTold: Config.Running hears how many processes run each time a process starts
// or ends (hangar-envd moves its soft memory limit with it).
func TestRunningIsTold(t *testing.T) {
	told := make(chan int, 8)
	url := serve(t, daemon.Config{Running: func(n int) { told <- n }})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	for range 2 {
		s := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"sh","args":["-c","echo a"]}}`))
		s.next() // start
		for _, want := range []int{1, 0} {
			select {
			case n := <-told:
				if n != want {
					t.Fatalf("Running told %d, want %d", n, want)
				}
			case <-ctx.Done():
				t.Fatalf("Running was not told %d", want)
			}
		}
		s.next() // a
		s.next() // end
		s.end()
	}
}

func TestProtocolInputAndKeepalive(t *testing.T) {
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	s := open(t, rpcStream(t, ctx, url, "process.Process/Start", http.Header{"Keepalive-Ping-Interval": {"1"}},
		`{"process":{"cmd":"cat"},"tag":"t1"}`))
	pid := s.next()["event"].(map[string]any)["start"].(map[string]any)["pid"].(float64)
	wantJSON(t, "keepalive", s.next(), `{"event":{"keepalive":{}}}`)

	status, body := rpcUnary(t, ctx, url, "process.Process/List", nil, `{}`)
	if status != http.StatusOK {
		t.Fatalf("list: %d %v", status, body)
	}
	wantJSON(t, "list", body, `{"processes":[{"config":{"cmd":"cat"},"pid":`+jsonNumber(pid)+`,"tag":"t1"}]}`)

	status, body = rpcUnary(t, ctx, url, "process.Process/SendInput", nil, `{"process":{"tag":"t1"},"input":{"stdin":"aGk="}}`)
	if status != http.StatusOK {
		t.Fatalf("send input: %d %v", status, body)
	}
	wantJSON(t, "send input", body, `{}`)
	wantJSON(t, "echoed", s.next(), `{"event":{"data":{"stdout":"aGk="}}}`)

	// StreamInput: a client stream; DataEvent's input is field 2, "input" in JSON.
	in := open(t, rpcStream(t, ctx, url, "process.Process/StreamInput", nil,
		`{"start":{"process":{"pid":`+jsonNumber(pid)+`}}}`, `{"data":{"input":{"stdin":"Yg=="}}}`, `{"keepalive":{}}`))
	wantJSON(t, "stream input answer", in.next(), `{}`)
	wantJSON(t, "stream input end", in.end(), `{}`)
	wantJSON(t, "streamed", s.next(), `{"event":{"data":{"stdout":"Yg=="}}}`)

	status, body = rpcUnary(t, ctx, url, "process.Process/CloseStdin", nil, `{"process":{"pid":`+jsonNumber(pid)+`}}`)
	if status != http.StatusOK {
		t.Fatalf("close stdin: %d %v", status, body)
	}
	// exitCode 0 is left out, as proto3 JSON leaves out zero values.
	wantJSON(t, "end", s.next(), `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`)
	s.end()

	// Connect to the ended process: start then end.
	c := open(t, rpcStream(t, ctx, url, "process.Process/Connect", nil, `{"process":{"tag":"t1"}}`))
	wantJSON(t, "connect start", c.next(), `{"event":{"start":{"pid":`+jsonNumber(pid)+`}}}`)
	wantJSON(t, "connect end", c.next(), `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`)
	c.end()

	c = open(t, rpcStream(t, ctx, url, "process.Process/Connect", nil, `{"process":{"pid":4000000}}`))
	if code := c.end()["error"].(map[string]any)["code"]; code != "not_found" {
		t.Errorf("connect to an unknown pid: code %v", code)
	}
	status, body = rpcUnary(t, ctx, url, "process.Process/SendSignal", nil, `{"process":{"pid":4000000},"signal":"SIGNAL_SIGKILL"}`)
	if status != http.StatusNotFound || body["code"] != "not_found" || body["message"] == "" {
		t.Errorf("signal an unknown pid: %d %v", status, body)
	}
	status, body = rpcUnary(t, ctx, url, "process.Process/SendSignal", nil, `{"process":{"pid":1},"signal":"SIGNAL_UNSPECIFIED"}`)
	if status != http.StatusBadRequest || body["code"] != "invalid_argument" {
		t.Errorf("an unspecified signal: %d %v", status, body)
	}
}

func TestProtocolSignal(t *testing.T) {
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	s := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"sleep","args":["60"]},"tag":"sl"}`))
	s.next()
	status, body := rpcUnary(t, ctx, url, "process.Process/SendSignal", nil, `{"process":{"tag":"sl"},"signal":"SIGNAL_SIGKILL"}`)
	if status != http.StatusOK {
		t.Fatalf("signal: %d %v", status, body)
	}
	wantJSON(t, "end", s.next(), `{"event":{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}}`)
	s.end()
}

// TestRecursiveWatchReportsWhatANewDirectoryHeld: a directory that arrives whole in a recursive
// watch (moved in, or filled before its own watch was in place) has its entries reported as
// created, below it too, rather than none of them.
func TestRecursiveWatchReportsWhatANewDirectoryHeld(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	w := open(t, rpcStream(t, ctx, url, "filesystem.Filesystem/WatchDir", nil, `{"path":"`+dir+`","recursive":true}`))
	wantJSON(t, "watch start", w.next(), `{"start":{}}`)
	made := filepath.Join(outside, "sub")
	if err := os.MkdirAll(filepath.Join(made, "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(made, "deeper", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(made, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sub", "sub/deeper", "sub/deeper/f"} {
		wantJSON(t, "event", w.next(), `{"filesystem":{"name":"`+name+`","type":"EVENT_TYPE_CREATE"}}`)
	}
	// And the directory is watched: a change in it has its own event.
	if err := os.WriteFile(filepath.Join(dir, "sub", "deeper", "g"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "event", w.next(), `{"filesystem":{"name":"sub/deeper/g","type":"EVENT_TYPE_CREATE"}}`)
}

func TestProtocolFilesystem(t *testing.T) {
	dir := t.TempDir()
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	w := open(t, rpcStream(t, ctx, url, "filesystem.Filesystem/WatchDir", nil, `{"path":"`+dir+`"}`))
	wantJSON(t, "watch start", w.next(), `{"start":{}}`)
	if err := os.Mkdir(filepath.Join(dir, "made"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "watch event", w.next(), `{"filesystem":{"name":"made","type":"EVENT_TYPE_CREATE"}}`)

	status, body := rpcUnary(t, ctx, url, "filesystem.Filesystem/Stat", nil, `{"path":"`+dir+`/made"}`)
	if status != http.StatusOK {
		t.Fatalf("stat: %d %v", status, body)
	}
	entry := body["entry"].(map[string]any)
	if entry["name"] != "made" || entry["type"] != "FILE_TYPE_DIRECTORY" || entry["path"] != dir+"/made" || entry["permissions"] != "drwxr-xr-x" {
		t.Errorf("stat entry: %v", entry)
	}
	status, body = rpcUnary(t, ctx, url, "filesystem.Filesystem/Stat", nil, `{"path":"`+dir+`/missing"}`)
	if status != http.StatusNotFound || body["code"] != "not_found" || !strings.Contains(body["message"].(string), "missing") {
		t.Errorf("stat a missing path: %d %v", status, body)
	}

	status, body = rpcUnary(t, ctx, url, "filesystem.Filesystem/CreateWatcher", nil, `{"path":"`+dir+`"}`)
	if status != http.StatusOK {
		t.Fatalf("create watcher: %d %v", status, body)
	}
	id := body["watcherId"].(string)
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var events []any
	for len(events) == 0 {
		status, body = rpcUnary(t, ctx, url, "filesystem.Filesystem/GetWatcherEvents", nil, `{"watcherId":"`+id+`"}`)
		if status != http.StatusOK {
			t.Fatalf("get watcher events: %d %v", status, body)
		}
		events, _ = body["events"].([]any)
	}
	if got := canonical(t, events[0]); got != `{"name":"f","type":"EVENT_TYPE_CREATE"}` {
		t.Errorf("watcher event: %s", got)
	}
	if status, body = rpcUnary(t, ctx, url, "filesystem.Filesystem/RemoveWatcher", nil, `{"watcherId":"`+id+`"}`); status != http.StatusOK {
		t.Errorf("remove watcher: %d %v", status, body)
	}
	if status, _ = rpcUnary(t, ctx, url, "filesystem.Filesystem/GetWatcherEvents", nil, `{"watcherId":"`+id+`"}`); status != http.StatusNotFound {
		t.Errorf("a removed watcher: %d", status)
	}
}

func TestProtocolAuthAndHealth(t *testing.T) {
	url := serve(t, daemon.Config{AccessToken: "tok"})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	res, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("health: %d, want 204", res.StatusCode)
	}
	status, body := rpcUnary(t, ctx, url, "process.Process/List", nil, `{}`)
	if status != http.StatusUnauthorized || body["code"] != "unauthenticated" || body["message"] == "" {
		t.Errorf("without the token: %d %v", status, body)
	}
	// A stream's error, as connect clients read it: the end of the stream, message included.
	end := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"true"}}`)).end()
	if e, _ := end["error"].(map[string]any); e["code"] != "unauthenticated" || !strings.Contains(e["message"].(string), "X-Access-Token") {
		t.Errorf("a stream without the token: %v", end)
	}
	h := http.Header{"X-Access-Token": {"tok"}, "Authorization": {"Basic bm8tc3VjaC11c2VyOg=="}} // no-such-user:
	status, body = rpcUnary(t, ctx, url, "process.Process/List", h, `{}`)
	if status != http.StatusUnauthorized || !strings.Contains(body["message"].(string), "no-such-user") {
		t.Errorf("an unknown user: %d %v", status, body)
	}
	end = open(t, rpcStream(t, ctx, url, "process.Process/Start", h, `{"process":{"cmd":"true"}}`)).end()
	if e, _ := end["error"].(map[string]any); e["code"] != "unauthenticated" || !strings.Contains(e["message"].(string), "no-such-user") {
		t.Errorf("a stream as an unknown user: %v", end)
	}
	h = http.Header{"X-Access-Token": {"tok"}, "Authorization": {"Basic cm9vdDo="}} // root:
	if status, body = rpcUnary(t, ctx, url, "process.Process/List", h, `{}`); status != http.StatusOK {
		t.Errorf("with the token: %d %v", status, body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/files?path=/etc/hostname", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !bytes.Contains(data, []byte(`"code":401`)) {
		t.Errorf("files without the token: %d %s", res.StatusCode, data)
	}
}

// TestAuthByTokenHash: a daemon started with its token's SHA-256 needs that token from its
// first request on, /init included (nothing can set another token before its owner does), and
// one with a malformed hash takes no token at all rather than every request.
func TestAuthByTokenHash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	url := serve(t, daemon.Config{AccessTokenSHA256: tokenSHA256("tok")})
	as := func(token string) http.Header {
		return http.Header{"X-Access-Token": {token}, "Authorization": {"Basic cm9vdDo="}} // root:
	}
	for _, h := range []http.Header{nil, as("wrong"), as(tokenSHA256("tok"))} {
		if status, body := rpcUnary(t, ctx, url, "process.Process/List", h, `{}`); status != http.StatusUnauthorized {
			t.Errorf("List with %v: %d %v, want 401", h, status, body)
		}
	}
	if status, body := rpcUnary(t, ctx, url, "process.Process/List", as("tok"), `{}`); status != http.StatusOK {
		t.Errorf("List with the token: %d %v", status, body)
	}
	init := func(h http.Header, body string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/init", strings.NewReader(body))
		maps.Copy(req.Header, h)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := init(nil, `{"accessToken": "mine"}`); got != http.StatusUnauthorized {
		t.Errorf("/init without the token: %d, want 401", got)
	}
	if got := init(as("tok"), `{"accessToken": "new"}`); got != http.StatusNoContent {
		t.Errorf("/init with the token: %d, want 204", got)
	}
	if status, _ := rpcUnary(t, ctx, url, "process.Process/List", as("tok"), `{}`); status != http.StatusUnauthorized {
		t.Errorf("the old token after /init set another: %d, want 401", status)
	}
	if status, body := rpcUnary(t, ctx, url, "process.Process/List", as("new"), `{}`); status != http.StatusOK {
		t.Errorf("the token /init set: %d %v", status, body)
	}

	bad := serve(t, daemon.Config{AccessTokenSHA256: "not hex"})
	for _, h := range []http.Header{nil, as(""), as("not hex")} {
		if status, _ := rpcUnary(t, ctx, bad, "process.Process/List", h, `{}`); status != http.StatusUnauthorized {
			t.Errorf("a malformed hash, List with %v: %d, want 401", h, status)
		}
	}
}

func tokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestWireNumbers fixes the field numbers and types envd's clients depend on, byte by byte.
func TestWireNumbers(t *testing.T) {
	cases := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		// exit_code is sint32: -1 is zigzag-encoded as 1.
		{"end exit_code sint32", &rpc.ProcessEvent_EndEvent{ExitCode: -1}, []byte{0x08, 0x01}},
		// StreamInputRequest.data (2) { input (2) { stdin (1) "x" } }
		{"stream input data", &rpc.StreamInputRequest{Event: &rpc.StreamInputRequest_Data{Data: &rpc.StreamInputRequest_DataEvent{
			Input: &rpc.ProcessInput{Input: &rpc.ProcessInput_Stdin{Stdin: []byte("x")}}}}}, []byte{0x12, 0x05, 0x12, 0x03, 0x0a, 0x01, 'x'}},
		// ProcessEvent.keepalive is 4, data.pty is 3.
		{"keepalive", &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Keepalive{Keepalive: &rpc.ProcessEvent_KeepAlive{}}}, []byte{0x22, 0x00}},
		{"pty data", &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Pty{Pty: []byte("y")}}}}, []byte{0x12, 0x03, 0x1a, 0x01, 'y'}},
		// StartRequest.stdin is 4, tag 3.
		{"start stdin", &rpc.StartRequest{Stdin: proto.Bool(false)}, []byte{0x20, 0x00}},
		{"signal kill", &rpc.SendSignalRequest{Signal: rpc.Signal_SIGNAL_SIGKILL}, []byte{0x10, 0x09}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got % x, want % x", got, tc.want)
			}
		})
	}
}
