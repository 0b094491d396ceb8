package replicas_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// hangarBin is the built hangar (hangar-envd beside it) that the replicas run.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithHangar(m, &hangarBin)) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 60 * time.Second

// replica is one `hangar serve` process of a test's service.
type replica struct {
	name string
	url  string
	*providertest.Serve
}

// service is the replicas of one test: one database schema, one data dir (the local provider's
// sandboxes, the admin token and the process-tag key, which every replica must share).
type service struct {
	t     *testing.T
	db    string
	dir   string
	token string
	args  []string
}

// newService starts nothing yet: start adds replicas. args are serve's extra flags.
func newService(t *testing.T, args ...string) *service {
	t.Helper()
	db := storetest.FreshSchema(t, storetest.PostgresURL(t))
	return &service{t: t, db: db, dir: t.TempDir(), args: args}
}

// start runs a replica and waits until it is ready; the first one makes the admin token.
func (s *service) start(name string) *replica {
	t := s.t
	t.Helper()
	args := append([]string{"--database-url", s.db, "--lease-seconds", "2", "--log-level", "debug"}, s.args...)
	proc, err := providertest.NewServe(hangarBin, s.dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, url: proc.URL, Serve: proc}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("replica %s's log:\n%s", r.name, r.Logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("replica %s: %v", name, err)
	}
	if s.token == "" {
		if s.token, err = r.AdminToken(); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call makes one request and returns its status and body.
func call(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// must is call that fails the test unless the status is 2xx, and decodes the answer into out.
func must(t *testing.T, method, url, token, body string, out any) {
	t.Helper()
	code, b := call(t, method, url, token, body)
	if code < 200 || code > 299 {
		t.Fatalf("%s %s = %d %s", method, url, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, b, err)
		}
	}
}

// sseEvent is one event of an SSE stream.
type sseEvent struct {
	name, id, data string
	at             time.Time
}

// openSSE reads an SSE stream into a channel, closed when the stream ends; lastEventID, when
// given, resumes it.
func openSSE(t *testing.T, ctx context.Context, url, token string, lastEventID ...string) <-chan sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for _, id := range lastEventID {
		req.Header.Set("Last-Event-ID", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	out := make(chan sseEvent, 1024)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					ev.at = time.Now()
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// next returns the next event named name (others are skipped), failing after waitTimeout or
// when the stream ends first.
func next(t *testing.T, events <-chan sseEvent, name string) sseEvent {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before a %s event", name)
			}
			if ev.name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within %s", name, waitTimeout)
		}
	}
}

// sandbox makes a local sandbox with a daemon through r, and destroys it at the test's end
// through whichever replica still runs.
func (s *service) sandbox(r *replica, name string, alive ...*replica) {
	s.t.Helper()
	must(s.t, "POST", r.url+"/api/sandboxes", s.token, fmt.Sprintf(`{"name":%q,"provider":"local"}`, name), nil)
	s.t.Cleanup(func() {
		for _, r := range append([]*replica{r}, alive...) {
			if r.Running() {
				call(s.t, "DELETE", r.url+"/api/sandboxes/"+name, s.token, "")
				return
			}
		}
	})
}

// metric reads one sample of a replica's /metrics ("" when it is not there).
func metric(t *testing.T, r *replica, name string) string {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// mcpCall calls an MCP tool in the 2026-07-28 revision (one request, no session) and returns
// the answer's body.
func mcpCall(t *testing.T, r *replica, token, tool, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest("POST", r.url+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool,
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("MCP %s through replica %s = %d %s", tool, r.name, resp.StatusCode, b)
	}
	return string(b)
}

// TestOutputThroughAnotherReplica: a process started through replica B is followed by B (it
// takes the sandbox's lease); a client attached through replica A sees its output, because A
// forwards the request to B; and listing through A shows what B follows.
func TestOutputThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	s := newService(t)
	a := s.start("a")
	b := s.start("b")
	s.sandbox(a, "out-sb", b)

	var started struct {
		ID string `json:"process_id"`
	}
	must(t, "POST", b.url+"/api/sandboxes/out-sb/processes", s.token,
		`{"command":"read x; echo hello-from-b; echo second-line"}`, &started)
	if got := metric(t, b, "hangar_leases_held"); got != "1" {
		t.Errorf("replica b holds %q leases, want 1", got)
	}
	if got := metric(t, a, "hangar_leases_held"); got != "0" {
		t.Errorf("replica a holds %q leases, want 0", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := openSSE(t, ctx, a.url+"/api/sandboxes/out-sb/processes/"+started.ID+"/stream", s.token)
	// Input through A too: the process prints only once it has read a line.
	must(t, "POST", a.url+"/api/sandboxes/out-sb/processes/"+started.ID+"/input", s.token, `{"input":"go\n"}`, nil)
	var out strings.Builder
	for !strings.Contains(out.String(), "second-line") {
		ev := next(t, events, "output")
		var o struct {
			Data string `json:"data"`
		}
		json.Unmarshal([]byte(ev.data), &o)
		out.WriteString(o.Data)
	}
	if !strings.Contains(out.String(), "hello-from-b") {
		t.Errorf("output through replica a = %q, want hello-from-b", out.String())
	}
	end := next(t, events, "end")
	if !strings.Contains(end.data, `"exit_code":0`) {
		t.Errorf("end through replica a = %s, want exit code 0", end.data)
	}
	var list struct {
		Processes []map[string]any `json:"processes"`
	}
	must(t, "GET", a.url+"/api/sandboxes/out-sb/processes", s.token, "", &list)
	if len(list.Processes) != 1 || list.Processes[0]["process_id"] != started.ID {
		t.Errorf("processes listed through replica a = %v, want the one b follows", list.Processes)
	}

	// Over MCP (2026-07-28, stateless), a process call through A is forwarded to B too.
	if out := mcpCall(t, a, s.token, "process", `{"action":"list","sandbox":"out-sb"}`); !strings.Contains(out, started.ID) {
		t.Errorf("MCP process list through replica a = %s, want the process b follows", out)
	}

	// A turn started through A in B's sandbox is queued for B, which runs it (A does not: it
	// does not own the sandbox).
	must(t, "POST", a.url+"/api/sessions", s.token, `{"name":"out","sandbox":"out-sb","agent":"command"}`, nil)
	turnEvents := openSSE(t, ctx, a.url+"/api/sessions/out/events/stream", s.token)
	prompt, _ := json.Marshal(map[string]string{"prompt": tickPrompt(3)})
	must(t, "POST", a.url+"/api/sessions/out/turns", s.token, string(prompt), nil)
	for {
		ev := next(t, turnEvents, "")
		if strings.Contains(ev.data, `"type":"turn.finished"`) {
			if !strings.Contains(ev.data, `"status":"done"`) {
				t.Errorf("turn.finished = %s, want done", ev.data)
			}
			break
		}
	}
}

// tickPrompt is a command-agent prompt that prints n JSON lines a tenth of a second apart, each
// with its number and the time it was printed (ns since the epoch). It starts no process per
// line: the time is bash's $EPOCHREALTIME (µs), the pause bash's read -t (pause).
func tickPrompt(n int) string {
	return fmt.Sprintf(`%s; for i in $(seq 1 %d); do echo "{\"type\":\"tick\",\"n\":$i,\"ns\":${EPOCHREALTIME/./}000}"; pause 0.1; done`, pause, n)
}

// pause defines the shell function `pause SECONDS`: bash's read -t on a pipe nothing writes to
// (fd 9), a pause without a sleep process each time.
const pause = `exec 9<> <(:); pause() { read -t "$1" -u 9 || :; }`

// printer is a process's command that prints numbered lines without end, 50 ms apart.
const printer = pause + `; i=0; while true; do echo line-$i; i=$((i+1)); pause 0.05; done`

// tick is what a tickPrompt line becomes as an event.
type tick struct {
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	Data struct {
		N  int   `json:"n"`
		NS int64 `json:"ns"`
	} `json:"data"`
}

// TestTakeoverAfterKill: replica B follows a process and watches a turn, and is killed with
// SIGKILL mid-turn. Replica A sees it dead at its next round (its database session ended: no
// waiting for the 15 s lease to expire), adopts the process and watches the turn on from its
// saved read position: the turn's events are recorded once each, gapless; the process takes
// input and ends through A, its end recorded once. Requests through A for the sandbox while B
// is dead and not yet seen so wait rather than fail: none gets a 5xx. Meanwhile a reader
// attached to A saw B's events live (LISTEN/NOTIFY).
func TestTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	s := newService(t, "--lease-seconds", "15")
	a := s.start("a")
	b := s.start("b")
	s.sandbox(a, "tk-sb", b)
	must(t, "POST", b.url+"/api/sessions", s.token, `{"name":"tk","sandbox":"tk-sb","agent":"command"}`, nil)
	const lines = 40
	prompt, _ := json.Marshal(map[string]string{"prompt": tickPrompt(lines)})
	must(t, "POST", b.url+"/api/sessions/tk/turns", s.token, string(prompt), nil)
	var proc struct {
		ID string `json:"process_id"`
	}
	must(t, "POST", b.url+"/api/sandboxes/tk-sb/processes", s.token, `{"command":"read x; echo got-$x"}`, &proc)

	// A reader on A sees the events B records, as B records them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := openSSE(t, ctx, a.url+"/api/sessions/tk/events/stream", s.token)
	var delays []time.Duration
	for {
		var tk tick
		ev := next(t, events, "")
		json.Unmarshal([]byte(ev.data), &tk)
		if tk.Type != "tick" {
			continue
		}
		delays = append(delays, ev.at.Sub(time.Unix(0, tk.Data.NS)))
		if tk.Data.N >= 5 {
			break
		}
	}
	t.Logf("from a line printed in the sandbox to its event at a reader on the other replica: %v", delays)

	// A request through A before the kill is forwarded to B (and opens a kept-alive
	// connection to it, which the kill breaks).
	if code, b := call(t, "GET", a.url+"/api/sandboxes/tk-sb/processes/"+proc.ID, s.token, ""); code != http.StatusOK {
		t.Fatalf("the process through replica a before the kill = %d %s", code, b)
	}
	b.Kill()
	killed := time.Now()
	var codes []int
	waitFor(t, "replica a to take the sandbox over", func() bool {
		code, _ := call(t, "GET", a.url+"/api/sandboxes/tk-sb/processes/"+proc.ID, s.token, "")
		codes = append(codes, code)
		return code == http.StatusOK
	})
	t.Logf("replica a answered for the sandbox %v after replica b was killed (lease 15s), answers meanwhile %v", time.Since(killed).Round(time.Millisecond), codes)
	for _, code := range codes {
		if code >= 500 || code == 0 {
			t.Errorf("a request through replica a while b was dead got %d; want it to wait for the takeover", code)
		}
	}
	if got := metric(t, a, "hangar_leases_held"); got != "1" {
		t.Errorf("replica a holds %q leases, want 1", got)
	}

	for {
		ev := next(t, events, "")
		if strings.Contains(ev.data, `"type":"turn.finished"`) {
			if !strings.Contains(ev.data, `"status":"done"`) {
				t.Errorf("turn.finished = %s, want done", ev.data)
			}
			break
		}
	}
	var page struct {
		Events []tick `json:"events"`
	}
	must(t, "GET", a.url+"/api/sessions/tk/events?limit=1000", s.token, "", &page)
	seen := map[int]int{}
	types := map[string]int{}
	for i, e := range page.Events {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d: seqs must be gapless from 1", i, e.Seq)
		}
		types[e.Type]++
		if e.Type == "tick" {
			seen[e.Data.N]++
		}
	}
	for n := 1; n <= lines; n++ {
		if seen[n] != 1 {
			t.Errorf("line %d recorded %d times, want once", n, seen[n])
		}
	}
	if types["turn.started"] != 1 || types["turn.finished"] != 1 {
		t.Errorf("turn.started recorded %d times, turn.finished %d: want once each", types["turn.started"], types["turn.finished"])
	}

	out := openSSE(t, ctx, a.url+"/api/sandboxes/tk-sb/processes/"+proc.ID+"/stream", s.token)
	must(t, "POST", a.url+"/api/sandboxes/tk-sb/processes/"+proc.ID+"/input", s.token, `{"input":"go\n"}`, nil)
	end := next(t, out, "end")
	if !strings.Contains(end.data, `"exit_code":0`) || !strings.Contains(end.data, `"adopted":true`) {
		t.Errorf("the process's end through replica a = %s, want exit code 0, adopted", end.data)
	}
}

// status makes a GET whose answer may be a stream that does not end, and returns its status
// (0 when the request failed); the body is left unread.
func status(t *testing.T, url, token string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRevokeAndLimitAcrossReplicas, with three replicas: a token's streams count across them
// all (HANGAR_STREAM_MAX_PER_TOKEN=2: two streams on B and C, and a third on A is refused),
// and revoking the token through A ends its streams on B at once, not at the next recheck
// (an hour here).
func TestRevokeAndLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := newService(t, "--stream-recheck-seconds", "3600", "--stream-max-per-token", "2")
	a := s.start("a")
	b := s.start("b")
	c := s.start("c")
	var bob struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	must(t, "POST", a.url+"/api/tokens", s.token, `{"user":"bob","scopes":["user"]}`, &bob)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onB := openSSE(t, ctx, b.url+"/api/fleet/stream", bob.Token)
	cctx, closeC := context.WithCancel(ctx)
	onC := openSSE(t, cctx, c.url+"/api/fleet/stream", bob.Token)
	next(t, onB, "snapshot")
	next(t, onC, "snapshot")
	if code := status(t, a.url+"/api/fleet/stream", bob.Token); code != http.StatusTooManyRequests {
		t.Errorf("a third stream of the token, on replica a = %d, want 429", code)
	}
	// One closed on C: A admits one again.
	closeC()
	for range onC {
	}
	waitFor(t, "replica a to admit a stream once one closed on c", func() bool {
		return status(t, a.url+"/api/fleet/stream", bob.Token) == http.StatusOK
	})

	must(t, "DELETE", a.url+"/api/tokens/"+bob.ID, s.token, "", nil)
	end := next(t, onB, "close")
	if !strings.Contains(end.data, "revoked") {
		t.Errorf("the stream on replica b closed with %s, want revoked", end.data)
	}
}

// TestHandoverOnShutdown: replica B follows a process that prints without end and watches a
// turn, and gets SIGTERM. It hands the sandbox to A, which follows it without anyone asking
// (only its metric is read); the client attached through A (forwarded to B) is ended with
// shutdown, and attaching again through A with Last-Event-ID continues past the last id it
// had, never repeating one (an explicit gap for what was printed while nobody followed); the
// turn's lines are recorded once each.
func TestHandoverOnShutdown(t *testing.T) {
	t.Parallel()
	s := newService(t, "--lease-seconds", "15")
	a := s.start("a")
	b := s.start("b")
	s.sandbox(a, "ho-sb", b)
	must(t, "POST", b.url+"/api/sessions", s.token, `{"name":"ho","sandbox":"ho-sb","agent":"command"}`, nil)
	const lines = 40
	prompt, _ := json.Marshal(map[string]string{"prompt": tickPrompt(lines)})
	must(t, "POST", b.url+"/api/sessions/ho/turns", s.token, string(prompt), nil)
	var proc struct {
		ID string `json:"process_id"`
	}
	must(t, "POST", b.url+"/api/sandboxes/ho-sb/processes", s.token, `{"command":`+strconv.Quote(printer)+`}`, &proc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := openSSE(t, ctx, a.url+"/api/sessions/ho/events/stream", s.token)
	for {
		var tk tick
		json.Unmarshal([]byte(next(t, events, "").data), &tk)
		if tk.Type == "tick" && tk.Data.N >= 5 {
			break
		}
	}
	streamURL := a.url + "/api/sandboxes/ho-sb/processes/" + proc.ID + "/stream"
	out := openSSE(t, ctx, streamURL, s.token)
	var last int64
	for range 3 {
		ev := next(t, out, "output")
		last, _ = strconv.ParseInt(ev.id, 10, 64)
	}
	if got := metric(t, a, "hangar_leases_held"); got != "0" {
		t.Fatalf("replica a holds %q leases before b stops, want 0", got)
	}

	// A plain exec in flight on B when it gets SIGTERM: B lets it finish (HANGAR_SHUTDOWN_GRACE),
	// but hands the sandbox over first.
	// (The local provider's commands run on this machine: the exec says it runs by a file.)
	marker := filepath.Join(t.TempDir(), "exec-runs")
	execDone := make(chan struct{})
	go func() {
		defer close(execDone)
		call(t, "POST", b.url+"/api/sandboxes/ho-sb/exec", s.token, fmt.Sprintf(`{"command":"touch %s; sleep 8"}`, marker))
	}()
	waitFor(t, "the exec to run on b", func() bool { _, err := os.Stat(marker); return err == nil })
	// Requests through A for the sandbox all along (forwarded to B, then served by A) get no 5xx.
	polling, polled := make(chan struct{}), make(chan []int)
	go func() {
		var codes []int
		for {
			select {
			case <-polling:
				polled <- codes
				return
			default:
			}
			req, _ := http.NewRequest("GET", a.url+"/api/sandboxes/ho-sb/processes/"+proc.ID, nil)
			req.Header.Set("Authorization", "Bearer "+s.token)
			code := 0
			if resp, err := http.DefaultClient.Do(req); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
				if code != http.StatusOK {
					t.Logf("GET through replica a: %d %s", code, body)
				}
			}
			codes = append(codes, code)
		}
	}()
	// A turn started through A as B gets SIGTERM is queued for B, which hands the sandbox over
	// before it or after it started the turn: either way A runs or watches it to its end
	// (only a lease taken from a dead replica fails the turns queued for it).
	must(t, "POST", b.url+"/api/sessions", s.token, `{"name":"ho2","sandbox":"ho-sb","agent":"command"}`, nil)
	prompt2, _ := json.Marshal(map[string]string{"prompt": tickPrompt(3)})
	stopDone := make(chan struct{})
	go func() { defer close(stopDone); b.Stop() }()
	stopped := time.Now()
	var queued struct {
		ID string `json:"id"`
	}
	must(t, "POST", a.url+"/api/sessions/ho2/turns", s.token, string(prompt2), &queued)
	waitFor(t, "replica a to hold the sandbox's lease, unasked", func() bool { return metric(t, a, "hangar_leases_held") == "1" })
	t.Logf("replica a held the sandbox's lease %v after replica b got SIGTERM, without a request for it", time.Since(stopped).Round(time.Millisecond))
	select {
	case <-execDone:
		t.Error("replica b handed its sandbox over only once the exec in flight had finished")
	default:
	}
	<-stopDone
	close(polling)
	codes := <-polled
	byCode := map[int]int{}
	for _, code := range codes {
		byCode[code]++
	}
	t.Logf("requests through replica a while b stopped, by status: %v", byCode)
	if byCode[http.StatusOK] != len(codes) {
		t.Errorf("of %d requests through replica a while b stopped, some got no 200: %v", len(codes), byCode)
	}

	ended := ""
	for ev := range out {
		if ev.name == "output" {
			last, _ = strconv.ParseInt(ev.id, 10, 64)
		}
		if ev.name == "close" {
			ended = ev.data
		}
	}
	if !strings.Contains(ended, "shutdown") {
		t.Errorf("the attachment forwarded to b ended with %q, want a close event saying shutdown", ended)
	}

	again := openSSE(t, ctx, streamURL, s.token, strconv.FormatInt(last, 10))
	from := last
	timeout := time.After(waitTimeout)
	for n := 0; n < 5; {
		var ev sseEvent
		select {
		case e, ok := <-again:
			if !ok {
				t.Fatal("the attachment resumed through replica a ended")
			}
			ev = e
		case <-timeout:
			t.Fatalf("no output within %s of resuming through replica a", waitTimeout)
		}
		switch ev.name {
		case "gap":
			var g struct {
				From, To int64
				Lost     string
			}
			json.Unmarshal([]byte(ev.data), &g)
			if g.From != last || g.To <= last || g.Lost == "" {
				t.Errorf("gap %s after resuming from %d; want one from %d, saying the output is lost", ev.data, last, last)
			}
			from = g.To
		case "output":
			id, _ := strconv.ParseInt(ev.id, 10, 64)
			if id <= from {
				t.Fatalf("output id %d after %d: an id repeated across the handover", id, from)
			}
			from = id
			n++
		}
	}

	for {
		ev := next(t, events, "")
		if strings.Contains(ev.data, `"type":"turn.finished"`) {
			if !strings.Contains(ev.data, `"status":"done"`) {
				t.Errorf("turn.finished = %s, want done", ev.data)
			}
			break
		}
	}
	var page struct {
		Events []tick `json:"events"`
	}
	must(t, "GET", a.url+"/api/sessions/ho/events?limit=1000", s.token, "", &page)
	seen := map[int]int{}
	for i, e := range page.Events {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d: seqs must be gapless from 1", i, e.Seq)
		}
		if e.Type == "tick" {
			seen[e.Data.N]++
		}
	}
	for n := 1; n <= lines; n++ {
		if seen[n] != 1 {
			t.Errorf("line %d recorded %d times, want once", n, seen[n])
		}
	}

	var turn struct{ State, Reason string }
	waitFor(t, "the turn started as b stopped to end", func() bool {
		must(t, "GET", a.url+"/api/sessions/ho2/turns/"+queued.ID, s.token, "", &turn)
		return turn.State != "queued" && turn.State != "running"
	})
	if turn.State != "done" {
		t.Errorf("the turn started through a as b stopped ended %s (%s); want done", turn.State, turn.Reason)
	}
}

// TestForwardingReplicaShutdown: a client attached through a replica that forwards to the
// owner, when that replica shuts down (a rolling restart), gets the close event with reason
// shutdown after its last output event and a clean end of the response, not a broken
// connection, and resumes through another replica after that event.
func TestForwardingReplicaShutdown(t *testing.T) {
	t.Parallel()
	s := newService(t)
	a := s.start("a")
	b := s.start("b")
	s.sandbox(b, "fs-sb")
	var proc struct {
		ID string `json:"process_id"`
	}
	must(t, "POST", b.url+"/api/sandboxes/fs-sb/processes", s.token, `{"command":`+strconv.Quote(printer)+`}`, &proc)
	if got := metric(t, b, "hangar_leases_held"); got != "1" {
		t.Fatalf("replica b holds %q leases, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	streamPath := "/api/sandboxes/fs-sb/processes/" + proc.ID + "/stream"
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+streamPath, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var read strings.Builder
	for ids := 0; ids < 3; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the attachment through replica a broke before 3 events: %v", err)
		}
		read.WriteString(line)
		if strings.HasPrefix(line, "id: ") {
			ids++
		}
	}

	a.Stop()
	rest, err := io.ReadAll(rd)
	read.Write(rest)
	if err != nil {
		t.Errorf("the attachment through replica a broke (%v) when a shut down, want a clean end", err)
	}
	all := read.String()
	if !strings.HasSuffix(all, "event: close\ndata: {\"reason\":\"shutdown\"}\n\n") {
		t.Fatalf("the attachment through replica a ended with %q, want the close event saying shutdown", all[max(0, len(all)-200):])
	}
	last := all[strings.LastIndex(all, "\nid: ")+len("\nid: "):]
	last = last[:strings.IndexByte(last, '\n')]
	from, _ := strconv.ParseInt(last, 10, 64)
	again := openSSE(t, ctx, b.url+streamPath, s.token, last)
	ev := next(t, again, "output")
	if id, _ := strconv.ParseInt(ev.id, 10, 64); id <= from {
		t.Errorf("resumed through replica b at id %d, want one after %d", id, from)
	}
}

// TestLeasesSpreadAcrossReplicas, with three replicas and six sandboxes whose processes were
// all started through one: the leases spread (two each) without a request; once one replica is
// killed the two survivors split its sandboxes (three each), unasked; and a replica started
// then takes its share again (the HangarReplicaHoldsNoLeases alert stays quiet after a
// rollout).
func TestLeasesSpreadAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := newService(t, "--lease-seconds", "15")
	a := s.start("a")
	b := s.start("b")
	c := s.start("c")
	const n = 6
	for i := range n {
		name := fmt.Sprintf("sp-sb%d", i)
		s.sandbox(a, name, b)
		must(t, "POST", c.url+"/api/sandboxes/"+name+"/processes", s.token, `{"command":"read x"}`, nil)
	}
	held := func(rs ...*replica) []string {
		var out []string
		for _, r := range rs {
			out = append(out, metric(t, r, "hangar_leases_held"))
		}
		return out
	}
	want := func(rs []*replica, each ...string) func() bool {
		return func() bool { return slices.Equal(held(rs...), each) }
	}
	waitFor(t, "the leases to spread two by two", want([]*replica{a, b, c}, "2", "2", "2"))

	c.Kill()
	killed := time.Now()
	waitFor(t, "a and b to split c's sandboxes, unasked", want([]*replica{a, b}, "3", "3"))
	t.Logf("a and b held 3 leases each %v after c was killed (lease 15s), without a request", time.Since(killed).Round(time.Millisecond))

	d := s.start("d")
	started := time.Now()
	waitFor(t, "a replica started after the kill to take its share", want([]*replica{a, b, d}, "2", "2", "2"))
	t.Logf("the new replica held its share %v after it was ready", time.Since(started).Round(time.Millisecond))
}
