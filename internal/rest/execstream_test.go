package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	name, id string
	data     map[string]any
	at       time.Time
}

// sseStream reads a real SSE response.
type sseStream struct {
	resp     *http.Response
	r        *bufio.Reader
	comments int
	cancel   context.CancelFunc
}

func (e *env) openStream(t *testing.T, tok, path, body string) (*sseStream, response) {
	t.Helper()
	return e.sse(t, "POST", tok, path, body, "")
}

// sse opens an SSE stream with method; lastID, when set, is sent as Last-Event-ID. A refused
// stream comes back as its response.
func (e *env) sse(t *testing.T, method, tok, path, body, lastID string) (*sseStream, response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
		json.Unmarshal(raw, &r.body)
		return nil, r
	}
	s := &sseStream{resp: resp, r: newReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s, response{status: resp.StatusCode, header: resp.Header}
}

func (s *sseStream) close() { s.cancel(); s.resp.Body.Close() }

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64<<10) }

// next reads the next event (skipping comments); io.EOF at the end of the response.
func (s *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != nil {
				ev.at = time.Now()
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				return ev, fmt.Errorf("data is not one JSON line: %q", line)
			}
		default:
			return ev, fmt.Errorf("not an SSE line: %q", line)
		}
	}
}

// all reads every event up to the end of the response.
func (s *sseStream) all(t *testing.T) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := s.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read SSE: %v", err)
		}
		out = append(out, ev)
	}
}

func (s *sseStream) until(t *testing.T, name string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("read SSE waiting for %q: %v (got %v)", name, err, out)
		}
		out = append(out, ev)
		if ev.name == name {
			return out
		}
	}
}

func output(events []sseEvent, names ...string) string {
	var b strings.Builder
	for _, ev := range events {
		for _, n := range names {
			if ev.name == n {
				b.WriteString(ev.data["data"].(string))
			}
		}
	}
	return b.String()
}

func (e *env) sandbox(t *testing.T, tok, name, extra string) {
	t.Helper()
	if r := e.do(t, "POST", "/api/sandboxes", tok, `{"name": "`+name+`"`+extra+`}`); r.status != http.StatusCreated {
		t.Fatalf("create %s = %d %s", name, r.status, r.raw)
	}
}

func execBody(cmd string) string {
	b, _ := json.Marshal(map[string]any{"command": cmd})
	return string(b)
}

func TestExecStreamAsItPrints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo one; sleep 0.5; echo two >&2; sleep 0.5; printf '\\377end'; exit 2"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	events := s.all(t)
	var names []string
	for _, ev := range events {
		names = append(names, ev.name)
	}
	if strings.Join(names, ",") != "stdout,stderr,stdout,result" {
		t.Fatalf("events = %v", names)
	}
	if events[0].data["data"] != "one\n" || events[1].data["data"] != "two\n" {
		t.Errorf("output events = %v %v", events[0].data, events[1].data)
	}
	if events[2].data["encoding"] != "base64" || events[2].data["data"] != "/2VuZA==" {
		t.Errorf("invalid UTF-8 event = %v, want base64 of \\377end", events[2].data)
	}
	// Streamed: the first line reached us well before the command ended.
	if gap := events[3].at.Sub(events[0].at); gap < 500*time.Millisecond {
		t.Errorf("the first line came only %v before the result: not streamed", gap)
	}
	res := events[3].data
	if res["exit_code"] != 2.0 || res["streamed"] != true || res["via"] != "daemon" || res["stdout"] != "one\n/2VuZA==" && res["stdout_encoding"] != "base64" {
		t.Errorf("result = %v", res)
	}
	if _, closed := res["closed"]; closed {
		t.Errorf("a stream that ended by itself says closed: %v", res)
	}
}

// TestExecStreamCarriesSplitCharacter: a read that ends inside a character (here the command
// stops in the middle of "€" until the test has seen what came before it) does not turn valid
// UTF-8 into a base64 event: the partial character waits for the rest.
func TestExecStreamCarriesSplitCharacter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	gate, goOn := providertest.Gate(t)
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream",
		execBody(`printf 'a\342\202'; read _ < `+gate+`; printf '\254b\n'; printf '\303' >&2`))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	first := s.until(t, "stdout")
	if ev := first[len(first)-1]; ev.data["data"] != "a" || ev.data["encoding"] != nil {
		t.Fatalf("first event = %v, want just the whole character before the split one, as text", ev.data)
	}
	goOn()
	events := s.all(t)
	var stdout []any
	for _, ev := range events {
		if ev.name == "stdout" {
			stdout = append(stdout, ev.data["data"], ev.data["encoding"])
		}
	}
	if len(stdout) != 2 || stdout[0] != "€b\n" || stdout[1] != nil {
		t.Errorf("the rest of stdout = %v, want one text event \"€b\\n\"", stdout)
	}
	// Output that ends inside a character is sent at the end, as the bytes it is.
	if got := output(events, "stderr"); got != "ww==" {
		t.Errorf("stderr = %q, want the lone byte, base64", got)
	}
}

func TestExecStreamBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/sandboxes/nope/exec/stream", execBody("true"), 404},
		{"/api/sandboxes/box/exec/stream", `{"command": ""}`, 400},
		{"/api/sandboxes/box/exec/stream", `{"command": "true", "timeout": -2}`, 400},
		{"/api/sandboxes/box/exec/stream", `{"command": true}`, 400},
		{"/api/sandboxes/box/exec/stream", `{"command": "echo a\u0000b"}`, 400},
		{"/api/sandboxes/box/exec/stream", `{"command": "true", "timeout": 1e-10}`, 400},
		{"/api/sandboxes/box/exec/stream", `{"command": "true", "env": {"A=B": "c"}}`, 400},
	} {
		if s, r := e.openStream(t, e.admin, c.path, c.body); s != nil || r.status != c.status {
			t.Errorf("POST %s %s = %d, want %d", c.path, c.body, r.status, c.status)
		}
	}
	// A cwd the daemon cannot start in is refused before the stream opens, as exec refuses it.
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", `{"command": "true", "cwd": "/no/such/dir"}`)
	if s != nil {
		t.Fatalf("exec/stream with a missing cwd opened its stream: %v", s.all(t))
	}
	wantError(t, r, 400, "bad_request")
	if !strings.Contains(r.raw, "/no/such/dir") {
		t.Errorf("the refusal does not name the cwd: %s", r.raw)
	}
	// The stream still works after it, with a cwd that is there.
	if s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", `{"command": "pwd", "cwd": "/tmp"}`); s == nil {
		t.Errorf("exec/stream in /tmp = %d %s", r.status, r.raw)
	} else if evs := s.all(t); len(evs) == 0 || evs[len(evs)-1].name != "result" {
		t.Errorf("exec/stream in /tmp: %v, want its result last", evs)
	}
}

func TestExecStreamNoDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "plain", `, "daemon": false`)
	s, r := e.openStream(t, e.admin, "/api/sandboxes/plain/exec/stream", execBody("echo hi"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	events := s.all(t)
	if len(events) != 1 || events[0].name != "result" {
		t.Fatalf("events = %v, want just the result", events)
	}
	if res := events[0].data; res["streamed"] != false || res["stdout"] != "hi\n" || res["via"] != "provider" {
		t.Errorf("result = %v", res)
	}
}

// pidOf waits for a command to write its pid to file.
func pidOf(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleeper is a command that records its child's pid, says it started and waits.
func sleeper(pidFile string) string {
	return execBody("sleep 300 & echo $! > " + pidFile + "; echo started; wait")
}

func TestExecStreamClientGoneKillsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", sleeper(pidFile))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	pid := pidOf(t, pidFile)
	s.close()
	waitDead(t, pid)
}

func TestExecStreamRevokedKillsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, tok := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, tok, "box", "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, r := e.openStream(t, tok, "/api/sandboxes/box/exec/stream", sleeper(pidFile))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	pid := pidOf(t, pidFile)
	if r := e.do(t, "DELETE", "/api/tokens/"+id, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", r.status, r.raw)
	}
	events := s.until(t, "result")
	if res := events[len(events)-1].data; res["closed"] != "revoked" || res["status"] != "killed: the stream's token was revoked or expired" {
		t.Errorf("result = %v, want closed: revoked, and a status that says so", res)
	}
	waitDead(t, pid)
}

func TestExecStreamRecheckEndsExpiredToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expires := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	_, tok := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"], "expires_at": "`+expires+`"}`)
	e.sandbox(t, tok, "box", "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, r := e.openStream(t, tok, "/api/sandboxes/box/exec/stream", sleeper(pidFile))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	pid := pidOf(t, pidFile)
	// The env's clock is fixed at its start; the recheck (every 200 ms here) sees the expiry
	// once the clock passes it.
	e.setNow(time.Now().Add(time.Hour))
	events := s.until(t, "result")
	if res := events[len(events)-1].data; res["closed"] != "revoked" || res["status"] != "killed: the stream's token was revoked or expired" {
		t.Errorf("result = %v, want closed: revoked, and a status that says so", res)
	}
	waitDead(t, pid)
}

func TestExecStreamShutdownLeavesCommandRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", sleeper(pidFile))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	pid := pidOf(t, pidFile)
	defer syscall.Kill(pid, syscall.SIGKILL)
	e.streams.Shutdown()
	events := s.until(t, "result")
	res := events[len(events)-1].data
	if res["closed"] != "shutdown" || res["exit_code"] != nil || res["stdout"] != "started\n" {
		t.Errorf("result = %v, want closed: shutdown, exit_code null, the output so far", res)
	}
	if !alive(pid) {
		t.Error("the command was killed by the shutdown")
	}
	if s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("true")); s != nil || r.status != 503 {
		t.Errorf("a stream during shutdown = %d, want 503", r.status)
	}
}

func TestExecStreamDestroyedSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo started; sleep 300"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	if r := e.do(t, "DELETE", "/api/sandboxes/box", e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.raw)
	}
	events := s.until(t, "result")
	if res := events[len(events)-1].data; res["closed"] != "destroyed" {
		t.Errorf("result = %v, want closed: destroyed", res)
	}
}

// TestExecStreamPerUserLimit: a user's streams through several tokens stop at
// HANGAR_STREAM_MAX_PER_USER with a 429 naming it and the user, with Retry-After; another
// user still gets streams.
func TestExecStreamPerUserLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.maxPerUser = 3 }) // 4 per token, 6 in all
	_, m1 := e.newToken(t, e.admin, `{"user": "mallory", "scopes": ["user"]}`)
	_, m2 := e.newToken(t, e.admin, `{"user": "mallory", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)
	e.sandbox(t, m1, "m-box", "")
	e.sandbox(t, bob, "bob-box", "")
	long := execBody("echo started; sleep 300")
	for i, tok := range []string{m1, m1, m2} {
		s, r := e.openStream(t, tok, "/api/sandboxes/m-box/exec/stream", long)
		if s == nil {
			t.Fatalf("mallory's stream %d = %d %s", i+1, r.status, r.raw)
		}
		s.until(t, "stdout")
	}
	s, r := e.openStream(t, m2, "/api/sandboxes/m-box/exec/stream", long)
	if s != nil {
		t.Fatal("mallory's 4th stream, through her second token, was admitted past HANGAR_STREAM_MAX_PER_USER=3")
	}
	wantError(t, r, http.StatusTooManyRequests, "limit")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.raw, "HANGAR_STREAM_MAX_PER_USER") || !strings.Contains(r.raw, "mallory") {
		t.Errorf("429 without Retry-After, the limit's name or the user: %v %s", r.header, r.raw)
	}
	if s, r := e.openStream(t, bob, "/api/sandboxes/bob-box/exec/stream", long); s == nil {
		t.Errorf("bob's stream = %d %s", r.status, r.raw)
	}
}

func TestExecStreamLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // 4 per token, 6 in all
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)
	e.sandbox(t, ada, "ada-box", "")
	e.sandbox(t, bob, "bob-box", "")
	long := execBody("echo started; sleep 300")
	for i := 0; i < 4; i++ {
		s, r := e.openStream(t, ada, "/api/sandboxes/ada-box/exec/stream", long)
		if s == nil {
			t.Fatalf("ada's stream %d = %d %s", i+1, r.status, r.raw)
		}
		s.until(t, "stdout")
	}
	s, r := e.openStream(t, ada, "/api/sandboxes/ada-box/exec/stream", long)
	if s != nil {
		t.Fatal("ada's 5th stream was admitted past HANGAR_STREAM_MAX_PER_TOKEN=4")
	}
	wantError(t, r, http.StatusTooManyRequests, "limit")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.raw, "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("429 without Retry-After or the limit's name: %v %s", r.header, r.raw)
	}
	// Bob still gets his, up to the total of 6.
	for i := 0; i < 2; i++ {
		s, r := e.openStream(t, bob, "/api/sandboxes/bob-box/exec/stream", long)
		if s == nil {
			t.Fatalf("bob's stream %d = %d %s", i+1, r.status, r.raw)
		}
		s.until(t, "stdout")
	}
	_, r = e.openStream(t, bob, "/api/sandboxes/bob-box/exec/stream", long)
	wantError(t, r, http.StatusTooManyRequests, "limit")
	if !strings.Contains(r.raw, "HANGAR_STREAM_MAX_TOTAL") {
		t.Errorf("the total limit's error does not name it: %s", r.raw)
	}
}

func TestExecStreamByteCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.maxBytes = 1000 })
	e.sandbox(t, e.admin, "box", "")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("for i in $(seq 40); do echo line-$i-padding-padding-padding-padding-padding-padding-padding-padding-padding; done; echo THE-END"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	events := s.all(t)
	if got := len(output(events, "stdout", "stderr")); got > 1000 || got == 0 {
		t.Errorf("streamed %d bytes with a cap of 1000", got)
	}
	var capped bool
	for _, ev := range events {
		capped = capped || ev.name == "capped"
	}
	res := events[len(events)-1].data
	if !capped || res["capped"] != true {
		t.Errorf("no capped event or flag: %v", res)
	}
	if out, _ := res["stdout"].(string); !strings.HasSuffix(out, "THE-END\n") {
		t.Errorf("the result lacks the end of the output: %q", out)
	}
}

// TestStalledClientDelaysNoOne: a client that stops reading a fast stream does not hold up
// another client's stream.
func TestStalledClientDelaysNoOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	stalled, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("while :; do echo flood-flood-flood-flood-flood-flood-flood-flood; done"))
	if stalled == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	// Not reading from stalled at all.
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo hello; sleep 0.2; echo world"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	events := s.all(t)
	if got := output(events, "stdout"); got != "hello\nworld\n" {
		t.Errorf("the other stream got %q", got)
	}
	if res := events[len(events)-1].data; res["exit_code"] != 0.0 {
		t.Errorf("result = %v", res)
	}
}

func TestStreamMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	s, _ := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo hello"))
	s.all(t)
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`hangar_streams{kind="exec",reason="done"} 1`,
		`hangar_stream_bytes{kind="exec"} 6`,
		`hangar_streams_open{kind="exec"} 0`,
		`hangar_stream_first_output_seconds_count{kind="exec"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestExecStreamShutdownNoDaemon: without a daemon too, a shutdown lets the command run on.
func TestExecStreamShutdownNoDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "plain", `, "daemon": false`)
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, r := e.openStream(t, e.admin, "/api/sandboxes/plain/exec/stream", sleeper(pidFile))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	pid := pidOf(t, pidFile)
	defer syscall.Kill(pid, syscall.SIGKILL)
	e.streams.Shutdown()
	events := s.until(t, "result")
	if res := events[len(events)-1].data; res["closed"] != "shutdown" || res["exit_code"] != nil {
		t.Errorf("result = %v, want closed: shutdown and exit_code null", res)
	}
	if !alive(pid) {
		t.Error("the command was killed by the shutdown")
	}
}

// localDaemonPID is the pid of local sandbox name's daemon, from the provider's record.
func localDaemonPID(t *testing.T, e *env, name string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.dir, "sandboxes", name, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Daemon struct{ PID int } `json:"daemon"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Daemon.PID == 0 {
		t.Fatalf("sandbox record %s: %v", raw, err)
	}
	return rec.Daemon.PID
}

// TestExecStreamDaemonDies: the daemon of a local sandbox is killed while a command streams.
// The stream ends with an error event that blames the sandbox's daemon (unavailable, not
// hangar's internal error), and the sandbox is checked again: failed, with the reason.
func TestExecStreamDaemonDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	// The command says its pid: with its daemon gone nothing else would end it.
	s, r := e.openStream(t, e.admin, "/api/sandboxes/box/exec/stream", execBody("echo $$; exec sleep 300"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	up := s.until(t, "stdout")
	pid, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(up[len(up)-1].data["data"])))
	if err != nil {
		t.Fatalf("the command's pid: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(localDaemonPID(t, e, "box"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	events := s.all(t)
	last := events[len(events)-1]
	msg, _ := last.data["message"].(string)
	if last.name != "error" || last.data["code"] != "unavailable" || !strings.Contains(msg, "daemon of sandbox box") || !strings.Contains(msg, "failed") {
		t.Fatalf("last event = %s %v, want an unavailable error that says the daemon of box died and the sandbox failed", last.name, last.data)
	}
	if r := e.do(t, "GET", "/api/sandboxes/box", e.admin, ""); r.body["state"] != "failed" || !strings.Contains(fmt.Sprint(r.body["reason"]), "daemon") {
		t.Errorf("the sandbox after its daemon died = %v, want failed with the reason", r.body)
	}
}

// TestExecStreamContainerDies: a Docker sandbox's container is killed while a command streams.
// The stream ends with an unavailable error that says the sandbox stopped, and the sandbox is
// checked again: no longer running.
func TestExecStreamContainerDies(t *testing.T) {
	t.Parallel()
	needDocker(t)
	cli := dockertest.Client(t)
	image, err := dockertest.EnsureImage(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.sandbox(t, e.admin, "dock", `, "provider": "docker", "image": "`+image+`"`)
	s, r := e.openStream(t, e.admin, "/api/sandboxes/dock/exec/stream", execBody("echo up; sleep 300"))
	if s == nil {
		t.Fatalf("exec/stream = %d %s", r.status, r.raw)
	}
	s.until(t, "stdout")
	id := fmt.Sprint(e.do(t, "GET", "/api/sandboxes/dock", e.admin, "").body["provider_id"])
	if err := cli.ContainerKill(context.Background(), id, "KILL"); err != nil {
		t.Fatalf("kill container %s: %v", id, err)
	}
	events := s.all(t)
	last := events[len(events)-1]
	msg, _ := last.data["message"].(string)
	if last.name != "error" || last.data["code"] != "unavailable" || !strings.Contains(msg, "Sandbox dock stopped") {
		t.Fatalf("last event = %s %v, want an unavailable error that says sandbox dock stopped", last.name, last.data)
	}
	t.Logf("error event: %s", msg)
	if r := e.do(t, "GET", "/api/sandboxes/dock", e.admin, ""); r.body["state"] == "running" {
		t.Errorf("the sandbox after its container died = %v, want it no longer running", r.body)
	}
}

// TestExecAfterDaemonDied: the daemon of a local sandbox died while nothing ran; the next exec
// says so (unavailable, naming the daemon) and the sandbox is failed, not left running.
func TestExecAfterDaemonDied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pid := localDaemonPID(t, e, "box")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	r := e.do(t, "POST", "/api/sandboxes/box/exec", e.admin, execBody("echo hi"))
	msg, _ := r.body["error"].(map[string]any)["message"].(string)
	if r.status != 503 || !strings.Contains(msg, "daemon of sandbox box") || !strings.Contains(msg, "failed") {
		t.Errorf("exec = %d %s, want 503 naming the daemon and the failed sandbox", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/api/sandboxes/box", e.admin, ""); r.body["state"] != "failed" {
		t.Errorf("the sandbox = %v, want failed", r.body)
	}
}

// TestExecStreamOverH2C: hangar serves HTTP/2 without TLS to a client that speaks it with prior
// knowledge (curl --http2-prior-knowledge), on the same port as HTTP/1.1, and a streamed exec
// works over it as over HTTP/1.1, many on one connection.
func TestExecStreamOverH2C(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i := range 2 { // the second on the first's connection
		req, _ := http.NewRequest("POST", e.url+"/api/sandboxes/box/exec/stream", strings.NewReader(execBody("echo one; echo two >&2; exit 4")))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Fatalf("exec %d over h2c: %s %d, want HTTP/2 200", i, resp.Proto, resp.StatusCode)
		}
		s := &sseStream{resp: resp, r: newReader(resp.Body), cancel: func() {}}
		events := s.all(t)
		resp.Body.Close()
		if len(events) != 3 || events[2].name != "result" || events[2].data["exit_code"] != 4.0 ||
			output(events, "stdout") != "one\n" || output(events, "stderr") != "two\n" {
			t.Fatalf("exec %d over h2c: events %v", i, events)
		}
	}
}
