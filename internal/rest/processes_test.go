package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

func (e *env) startProcess(t *testing.T, tok, sandbox, command string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"command": command})
	r := e.do(t, "POST", "/api/sandboxes/"+sandbox+"/processes", tok, string(b))
	// A short command (exit 3, echo) may have ended before the 201 is written: on a loaded
	// machine its follower sees the exit first, and the 201 says so.
	if state := r.body["state"]; r.status != http.StatusCreated || (state != "running" && state != "exited") {
		t.Fatalf("start process = %d %s", r.status, r.raw)
	}
	return r.body["process_id"].(string)
}

// attach opens the SSE stream of a process, from since (or Last-Event-ID when lastID is set).
func (e *env) attach(t *testing.T, tok, sandbox, id, query, lastID string) (*sseStream, response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/sandboxes/"+sandbox+"/processes/"+id+"/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := response{status: resp.StatusCode, raw: string(raw)}
		json.Unmarshal(raw, &r.body)
		return nil, r
	}
	s := &sseStream{resp: resp, r: newReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s, response{status: 200, header: resp.Header}
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return b.String()
}

// TestProcessReattachByteExact: a client attaches to a process printing fast, goes away and
// comes back several times with Last-Event-ID; what it got is exactly the output, with no gap
// and no byte twice.
func TestProcessReattachByteExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	const n = 30000 // about 170 KB: all of it stays in the 256 KiB ring
	id := e.startProcess(t, e.admin, "box", fmt.Sprintf("for i in $(seq 1 %d); do echo $i; done", n))
	var got bytes.Buffer
	last := ""
	for round := 0; ; round++ {
		query := ""
		if round == 0 {
			query = "?since=0"
		}
		s, r := e.attach(t, e.admin, "box", id, query, last)
		if s == nil {
			t.Fatalf("attach = %d %s", r.status, r.raw)
		}
		ended := false
		for taken := 0; round == 3 || taken < 5; taken++ { // the fourth attach reads to the end
			ev, err := s.next()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if ev.name == "gap" {
				t.Fatalf("a gap in round %d: %v", round, ev.data)
			}
			if ev.name == "end" {
				ended = true
				break
			}
			got.WriteString(ev.data["data"].(string))
			if ev.id == "" {
				t.Fatal("an output event without an id")
			}
			last = ev.id
			if off, _ := strconv.Atoi(ev.id); off != got.Len() {
				t.Fatalf("event id %s, but %d bytes were received", ev.id, got.Len())
			}
		}
		s.close()
		if ended {
			break
		}
	}
	if got.String() != seqOutput(n) {
		t.Fatalf("reattached output differs from the process's: %d bytes, want %d", got.Len(), len(seqOutput(n)))
	}
}

func TestProcessGapAndPolling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	// 300 KiB, then quiet: the first 44 KiB are no longer kept.
	id := e.startProcess(t, e.admin, "box", "head -c 307200 /dev/zero | tr '\\0' x; echo; echo done; sleep 300")
	var info map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do(t, "GET", "/api/sandboxes/box/processes/"+id+"?since=0", e.admin, "")
		if r.status != 200 {
			t.Fatalf("read = %d %s", r.status, r.raw)
		}
		if strings.HasSuffix(r.body["output"].(string), "done\n") {
			info = r.body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the output never ended in done: %v", r.body["next"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	total := int64(307200 + len("\ndone\n"))
	gap := info["gap"].(map[string]any)
	if gap["from"] != 0.0 || int64(gap["to"].(float64)) != total-256<<10 || int64(info["next"].(float64)) != total {
		t.Errorf("gap = %v, next = %v; want 0..%d and %d", gap, info["next"], total-256<<10, total)
	}
	if len(info["output"].(string)) != 256<<10 {
		t.Errorf("kept %d bytes, want 256 KiB", len(info["output"].(string)))
	}
	s, _ := e.attach(t, e.admin, "box", id, "?since=10", "")
	ev, err := s.next()
	if err != nil || ev.name != "gap" || ev.data["from"] != 10.0 {
		t.Fatalf("first event of an attach from an old offset = %v %v, want a gap from 10", ev, err)
	}
	// Beyond the end: nothing now, and next is the end.
	r := e.do(t, "GET", "/api/sandboxes/box/processes/"+id+"?since=999999999", e.admin, "")
	if r.body["output"] != "" || int64(r.body["next"].(float64)) != total {
		t.Errorf("since past the end = %s", r.raw)
	}
	// The last hour: all of it was printed then, so all that is kept, and no gap.
	r = e.do(t, "GET", "/api/sandboxes/box/processes/"+id+"?since_seconds=3600", e.admin, "")
	if r.body["gap"] != nil || len(r.body["output"].(string)) != 256<<10 || int64(r.body["next"].(float64)) != total {
		t.Errorf("since_seconds=3600: gap %v, %d bytes, next %v; want all that is kept, no gap", r.body["gap"], len(r.body["output"].(string)), r.body["next"])
	}
	for _, bad := range []string{"?since=-1", "?since=abc", "?since_seconds=-1", "?since_seconds=10m", "?since=4&since_seconds=60"} {
		wantError(t, e.do(t, "GET", "/api/sandboxes/box/processes/"+id+bad, e.admin, ""), 400, "bad_request")
	}
}

func TestProcessInputAndEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	id := e.startProcess(t, e.admin, "box", "while read line; do echo got: $line; done; echo bye; exit 7")
	s, _ := e.attach(t, e.admin, "box", id, "", "")
	if r := e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "hello\n"}`); r.status != 204 {
		t.Fatalf("input = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "d29ybGQK", "base64": true, "eof": true}`); r.status != 204 {
		t.Fatalf("input = %d %s", r.status, r.raw)
	}
	events := s.until(t, "end")
	if got := output(events, "output"); got != "got: hello\ngot: world\nbye\n" {
		t.Errorf("output = %q", got)
	}
	end := events[len(events)-1].data
	if end["state"] != "exited" || end["exit_code"] != 7.0 {
		t.Errorf("end = %v", end)
	}
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "late"}`), 409, "conflict")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "!!", "base64": true}`), 400, "bad_request")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "`+strings.Repeat("x", 5000)+`"}`), 413, "too_large")
}

func TestProcessKillTrappedAndChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pidFile := filepath.Join(t.TempDir(), "child")
	id := e.startProcess(t, e.admin, "box", "trap 'echo ignoring TERM' TERM; sleep 300 & echo $! > "+pidFile+"; echo ready; while :; do wait; done")
	s, _ := e.attach(t, e.admin, "box", id, "", "")
	s.until(t, "output")
	child := pidOf(t, pidFile)
	start := time.Now()
	if r := e.do(t, "DELETE", "/api/sandboxes/box/processes/"+id, e.admin, ""); r.status != http.StatusAccepted {
		t.Fatalf("kill = %d %s", r.status, r.raw)
	}
	events := s.until(t, "end")
	end := events[len(events)-1].data
	if end["status"] != "signal: killed" {
		t.Errorf("end = %v, want killed by SIGKILL", end)
	}
	if time.Since(start) < 2*time.Second {
		t.Errorf("killed after %v: SIGKILL came before the 3 s grace", time.Since(start))
	}
	waitDead(t, child)
	// An exited process is still listed, with its exit.
	r := e.do(t, "GET", "/api/sandboxes/box/processes", e.admin, "")
	if !strings.Contains(r.raw, id) || !strings.Contains(r.raw, "signal: killed") {
		t.Errorf("list after kill = %s", r.raw)
	}
}

func TestProcessOwnershipAndRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, ada2 := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	id := e.startProcess(t, ada, "box", "echo mine")
	// Another token, even of the same user, sees nothing of it.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/sandboxes/box/processes/" + id, ""},
		{"GET", "/api/sandboxes/box/processes/" + id + "/stream", ""},
		{"POST", "/api/sandboxes/box/processes/" + id + "/input", `{"input": "x"}`},
		{"DELETE", "/api/sandboxes/box/processes/" + id, ""},
	} {
		wantError(t, e.do(t, c.method, c.path, ada2, c.body), 404, "not_found")
	}
	if r := e.do(t, "GET", "/api/sandboxes/box/processes", ada2, ""); strings.Contains(r.raw, id) {
		t.Errorf("another token lists the process: %s", r.raw)
	}
	// Exited processes stay listed for 10 minutes.
	s, _ := e.attach(t, ada, "box", id, "", "")
	s.until(t, "end")
	e.setNow(e.clock().Add(9 * time.Minute))
	if r := e.do(t, "GET", "/api/sandboxes/box/processes", ada, ""); !strings.Contains(r.raw, id) {
		t.Errorf("an exited process was dropped before 10 minutes: %s", r.raw)
	}
	e.setNow(e.clock().Add(2 * time.Minute))
	if r := e.do(t, "GET", "/api/sandboxes/box/processes", ada, ""); strings.Contains(r.raw, id) {
		t.Errorf("an exited process is listed after 10 minutes: %s", r.raw)
	}
	wantError(t, e.do(t, "GET", "/api/sandboxes/box/processes/"+id, ada, ""), 404, "not_found")
}

func TestProcessLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // 3 per token
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	for i := 0; i < 3; i++ {
		e.startProcess(t, ada, "box", "sleep 300")
	}
	r := e.do(t, "POST", "/api/sandboxes/box/processes", ada, `{"command": "sleep 300"}`)
	wantError(t, r, http.StatusTooManyRequests, "limit")
	if got := r.header.Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After = %q, want 10", got)
	}
	if !strings.Contains(r.raw, "HANGAR_BACKGROUND_MAX_PER_TOKEN") {
		t.Errorf("the limit's error does not name it: %s", r.raw)
	}
	// Another token is not affected.
	e.startProcess(t, e.admin, "box", "sleep 300")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes", ada, `{"command": ""}`), 400, "bad_request")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes", ada, `{"command": "echo a\u0000b"}`), 400, "bad_request")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes", ada, `{"command": "true", "cwd": "/`+strings.Repeat("c", 256)+`"}`), 400, "bad_request")
	wantError(t, e.do(t, "POST", "/api/sandboxes/nope/processes", ada, `{"command": "true"}`), 404, "not_found")
}

// TestProcessLimitPerUser: one user's tokens together may run HANGAR_BACKGROUND_MAX_PER_USER
// background processes, however many tokens it mints; another user is not affected.
func TestProcessLimitPerUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.maxUserProcs = 4 }) // 3 per token
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, ada2 := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	for _, tok := range []string{ada, ada, ada2, ada2} {
		e.startProcess(t, tok, "box", "sleep 300")
	}
	for _, tok := range []string{ada, ada2} {
		r := e.do(t, "POST", "/api/sandboxes/box/processes", tok, `{"command": "sleep 300"}`)
		wantError(t, r, http.StatusTooManyRequests, "limit")
		if !strings.Contains(r.raw, "HANGAR_BACKGROUND_MAX_PER_USER") || !strings.Contains(r.raw, "ser ada already has 4") {
			t.Errorf("the per-user limit's error does not name it and the user: %s", r.raw)
		}
	}
	e.sandbox(t, e.admin, "box2", "")
	e.startProcess(t, e.admin, "box2", "sleep 300")
}

// TestStalledAttachDelaysNoOne: one client attached to a fast process stops reading; the
// process runs to its end and another attached client gets everything.
func TestStalledAttachDelaysNoOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	id := e.startProcess(t, e.admin, "box", "read go; for i in $(seq 1 200000); do echo line-$i; done; echo finished")
	stalled, _ := e.attach(t, e.admin, "box", id, "", "")
	reader, _ := e.attach(t, e.admin, "box", id, "", "")
	_ = stalled // never read
	e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "go\n"}`)
	events := reader.until(t, "end")
	if got := output(events, "output"); !strings.HasSuffix(got, "line-200000\nfinished\n") {
		t.Errorf("the reading client's output ends %q", got[max(0, len(got)-40):])
	}
}

func TestProcessWithoutDaemonOnDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	image, err := dockertest.EnsureImage(context.Background(), dockertest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.sandbox(t, e.admin, "plain", `, "provider": "docker", "image": "`+image+`", "daemon": false`)
	id := e.startProcess(t, e.admin, "plain", "echo one; sleep 1; echo two; exit 3")
	s, _ := e.attach(t, e.admin, "plain", id, "", "")
	events := s.until(t, "end")
	if got := output(events, "output"); got != "one\ntwo\n" {
		t.Errorf("output = %q", got)
	}
	if end := events[len(events)-1].data; end["exit_code"] != 3.0 || end["daemon"] != false {
		t.Errorf("end = %v", end)
	}
	id = e.startProcess(t, e.admin, "plain", "sleep 300")
	r := e.do(t, "POST", "/api/sandboxes/plain/processes/"+id+"/input", e.admin, `{"input": "x"}`)
	wantError(t, r, http.StatusConflict, "conflict")
	if !strings.Contains(r.raw, "daemon") {
		t.Errorf("input without a daemon: %s", r.raw)
	}
	if r := e.do(t, "DELETE", "/api/sandboxes/plain/processes/"+id, e.admin, ""); r.status != http.StatusAccepted {
		t.Fatalf("kill = %d %s", r.status, r.raw)
	}
	s, _ = e.attach(t, e.admin, "plain", id, "", "")
	if end := s.until(t, "end"); end[len(end)-1].data["state"] != "exited" {
		t.Errorf("after kill: %v", end)
	}
	e.do(t, "DELETE", "/api/sandboxes/plain", e.admin, "")
}

// TestProcessFollowedAcrossPause: pausing the sandbox ends attachments (paused) but not the
// follower, so after resume the process's output is kept and attachable again.
func TestProcessFollowedAcrossPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	// A tick every 50 ms, paced by a read that times out on a FIFO nobody writes to (a sleep
	// would start a process per tick).
	pace, _ := providertest.Gate(t)
	id := e.startProcess(t, e.admin, "box", "exec 3<> "+pace+"; i=0; while :; do i=$((i+1)); echo tick $i; read -t 0.05 -u 3 _; done")
	s, _ := e.attach(t, e.admin, "box", id, "", "")
	s.until(t, "output")
	if r := e.do(t, "POST", "/api/sandboxes/box/pause", e.admin, ""); r.status != 200 {
		t.Fatalf("pause = %d %s", r.status, r.raw)
	}
	if events := s.until(t, "close"); events[len(events)-1].data["reason"] != "paused" {
		t.Errorf("the attachment ended with %v, want paused", events[len(events)-1].data)
	}
	before := int64(e.do(t, "GET", "/api/sandboxes/box/processes/"+id, e.admin, "").body["next"].(float64))
	if r := e.do(t, "POST", "/api/sandboxes/box/resume", e.admin, ""); r.status != 200 {
		t.Fatalf("resume = %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do(t, "GET", "/api/sandboxes/box/processes/"+id, e.admin, "")
		if next := int64(r.body["next"].(float64)); next > before+100 {
			if r.body["process"].(map[string]any)["state"] != "running" {
				t.Fatalf("after resume: %s", r.raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new output after resume: the follower was lost")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s2, _ := e.attach(t, e.admin, "box", id, fmt.Sprintf("?since=%d", before), "")
	if ev, err := s2.next(); err != nil || ev.name != "output" {
		t.Fatalf("attach after resume = %v %v", ev, err)
	}
}

// TestProcessLostWithItsDaemon: the daemon of a local sandbox is killed while a client is
// attached to a background process. hangar cannot tell whether the process runs on, so it is
// not reported exited with -1: the attachment ends with the process lost (no exit code) and
// why, and the sandbox is failed with the reason.
func TestProcessLostWithItsDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	id := e.startProcess(t, e.admin, "box", "while :; do echo tick; sleep 0.1; done")
	s, _ := e.attach(t, e.admin, "box", id, "", "")
	s.until(t, "output")
	if err := syscall.Kill(localDaemonPID(t, e, "box"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	events := s.until(t, "end")
	end := events[len(events)-1].data
	if end["state"] != "lost" || end["exit_code"] != nil || !strings.Contains(fmt.Sprint(end["status"]), "daemon") {
		t.Errorf("end = %v, want lost with no exit code, saying the daemon is gone", end)
	}
	if r := e.do(t, "GET", "/api/sandboxes/box", e.admin, ""); r.body["state"] != "failed" {
		t.Errorf("the sandbox after its daemon died = %v, want failed", r.body)
	}
}

// TestProcessStartAfterDaemonDied: starting a background process in a sandbox whose daemon
// died is the sandbox's failure (503, naming the daemon), not hangar's, and fails the sandbox.
func TestProcessStartAfterDaemonDied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	pid := localDaemonPID(t, e, "box")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	r := e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "sleep 60"}`)
	if r.status != 503 || !strings.Contains(r.raw, "daemon of sandbox box") {
		t.Errorf("start = %d %s, want 503 naming the daemon", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/api/sandboxes/box", e.admin, ""); r.body["state"] != "failed" {
		t.Errorf("the sandbox = %v, want failed", r.body)
	}
}

// TestProcessOnTerminal: a process started with a pty size runs on a terminal of that size,
// and resize changes it; a bad size, or resizing a process without a terminal, is 400.
func TestProcessOnTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	r := e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "stty size; read x; stty size", "pty": {"cols": 91, "rows": 17}}`)
	if r.status != http.StatusCreated || r.body["pty"] != true {
		t.Fatalf("start on a terminal = %d %s", r.status, r.raw)
	}
	id := r.body["process_id"].(string)
	s, _ := e.attach(t, e.admin, "box", id, "", "")
	var seen []sseEvent
	for !strings.Contains(output(seen, "output"), "17 91") {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("read SSE waiting for the size 17 91: %v (got %q)", err, output(seen, "output"))
		}
		seen = append(seen, ev)
	}
	if r := e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/resize", e.admin, `{"cols": 100, "rows": 30}`); r.status != 204 {
		t.Fatalf("resize = %d %s", r.status, r.raw)
	}
	e.do(t, "POST", "/api/sandboxes/box/processes/"+id+"/input", e.admin, `{"input": "\n"}`)
	if got := output(s.until(t, "end"), "output"); !strings.Contains(got, "30 100") {
		t.Errorf("output after resize = %q, want the new size 30 100", got)
	}
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes", e.admin, `{"command": "true", "pty": {"cols": 0, "rows": 5}}`), 400, "bad_request")
	plain := e.startProcess(t, e.admin, "box", "sleep 300")
	defer e.do(t, "DELETE", "/api/sandboxes/box/processes/"+plain, e.admin, "")
	wantError(t, e.do(t, "POST", "/api/sandboxes/box/processes/"+plain+"/resize", e.admin, `{"cols": 80, "rows": 24}`), 400, "bad_request")
}
