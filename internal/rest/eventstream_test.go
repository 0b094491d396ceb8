package rest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/runlogtest"
)

// getStream opens a GET SSE stream; lastID, when set, is sent as Last-Event-ID. A refused
// stream comes back as its response.
func (e *env) getStream(t *testing.T, tok, path, lastID string) (*sseStream, response) {
	t.Helper()
	return e.sse(t, "GET", tok, path, "", lastID)
}

// events reads n events, or up to the one whose type is untilType when n < 0. Each must be a
// plain message (no event name) whose id is its seq (idKey: "seq" or "job_seq").
func (s *sseStream) events(t *testing.T, n int, untilType, idKey string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for n < 0 || len(out) < n {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("read events after %d: %v", len(out), err)
		}
		if ev.name != "" {
			t.Fatalf("event %q (%v), want plain messages", ev.name, ev.data)
		}
		if ev.id != strconv.Itoa(int(ev.data[idKey].(float64))) {
			t.Fatalf("id %q for %s %v", ev.id, idKey, ev.data[idKey])
		}
		out = append(out, ev)
		if n < 0 && ev.data["type"] == untilType {
			break
		}
	}
	return out
}

// TestSessionEventStream replays a fixture log as a turn of the command agent while a client
// follows: the stored events first, then the live ones; a reconnect with Last-Event-ID (which
// wins over since) goes on exactly after the last event seen.
func TestSessionEventStream(t *testing.T) {
	t.Parallel()
	log := runlogtest.Path(t, "codex_exec_edit_file-change_failed-command.jsonl")
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	gate, open := providertest.Gate(t)
	// Each line 2 ms after the last, paced by a read that times out on a FIFO nobody writes to
	// (a sleep would start a process per line).
	pace, _ := providertest.Gate(t)
	prompt := `echo '{"type":"first"}'; read _ < ` + gate + `; exec 3<> ` + pace + `; ` +
		`while IFS= read -r l; do printf '%s\n' "$l"; read -t 0.002 -u 3 _ || :; done < ` + log
	if r := e.do(t, "POST", "/api/sessions/s1/turns", ada, jsonBody(map[string]string{"prompt": prompt})); r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	for _, q := range []string{"?since=abc", "?since=-1"} {
		if _, r := e.getStream(t, ada, "/api/sessions/s1/events/stream"+q, ""); r.status != http.StatusBadRequest {
			t.Errorf("since %s = %d %s, want 400", q, r.status, r.raw)
		}
	}
	if _, r := e.getStream(t, ada, "/api/sessions/nope/events/stream", ""); r.status != http.StatusNotFound {
		t.Errorf("unknown session = %d %s, want 404", r.status, r.raw)
	}
	s, r := e.getStream(t, ada, "/api/sessions/s1/events/stream?since=0", "")
	if s == nil {
		t.Fatalf("events/stream = %d %s", r.status, r.raw)
	}
	if r.header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
	}
	got := s.events(t, 2, "", "seq") // turn.started and the first line: the rest waits for the gate
	open()
	got = append(got, s.events(t, 10, "", "seq")...) // live: recorded after the stream opened
	s.close()
	// since=1 would repeat events: Last-Event-ID wins.
	s, r = e.getStream(t, ada, "/api/sessions/s1/events/stream?since=1", got[len(got)-1].id)
	if s == nil {
		t.Fatalf("resume = %d %s", r.status, r.raw)
	}
	got = append(got, s.events(t, -1, "turn.finished", "seq")...)
	want, _ := os.ReadFile(log)
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	if len(got) != len(lines)+3 {
		t.Fatalf("%d events, want %d (turn.started, first, the log, turn.finished)", len(got), len(lines)+3)
	}
	for i, ev := range got {
		if ev.id != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %s: a gap or a duplicate", i+1, ev.id)
		}
	}
	if got[0].data["type"] != "turn.started" || got[1].data["type"] != "first" {
		t.Errorf("first events %v, %v", got[0].data, got[1].data)
	}
	for i, l := range lines {
		var exp any
		json.Unmarshal(l, &exp)
		if jsonBody(got[i+2].data["data"]) != jsonBody(exp) {
			t.Fatalf("event %d = %v, want line %d %s", i+3, got[i+2].data["data"], i+1, l)
		}
	}
}

// TestJobEventStream: a jobs token follows its own job (ids are job seqs); another jobs
// token's request is 404, as for a job that does not exist.
func TestJobEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, jobs := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	_, jobs2 := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	r := e.do(t, "POST", "/api/jobs", jobs, `{"prompt": "echo '{\"type\":\"hi\"}'", "agent": "command", "sandbox": {"name": "jobbox"}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/jobs = %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	if _, r := e.getStream(t, jobs2, "/api/jobs/"+id+"/events/stream", ""); r.status != http.StatusNotFound {
		t.Errorf("another jobs token's stream = %d %s, want 404", r.status, r.raw)
	}
	if _, r := e.getStream(t, jobs, "/api/sessions/x/events/stream", ""); r.status != http.StatusForbidden {
		t.Errorf("a jobs token's session stream = %d %s, want 403", r.status, r.raw)
	}
	s, r := e.getStream(t, jobs, "/api/jobs/"+id+"/events/stream", "")
	if s == nil {
		t.Fatalf("job events/stream = %d %s", r.status, r.raw)
	}
	got := s.events(t, -1, "turn.finished", "job_seq")
	if len(got) != 3 || got[1].data["type"] != "hi" || got[2].id != "3" {
		t.Errorf("job events = %v", got)
	}
}

// TestEventStreamLimitAndRevocation: event streams count against the per-token limit (429
// past it), and revoking the token ends them with a close event saying so.
func TestEventStreamLimitAndRevocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // 4 per token
	id, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	var open []*sseStream
	for i := 0; i < 4; i++ {
		s, r := e.getStream(t, ada, "/api/sessions/s1/events/stream", "")
		if s == nil {
			t.Fatalf("stream %d = %d %s", i+1, r.status, r.raw)
		}
		open = append(open, s)
	}
	_, r := e.getStream(t, ada, "/api/sessions/s1/events/stream", "")
	wantError(t, r, http.StatusTooManyRequests, "limit")
	if r := e.do(t, "DELETE", "/api/tokens/"+id, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", r.status, r.raw)
	}
	for _, s := range open {
		ev, err := s.next()
		if err != nil || ev.name != "close" || ev.data["reason"] != "revoked" {
			t.Fatalf("after revocation: %v %v, want a close event with reason revoked", ev, err)
		}
		if _, err := s.next(); err != io.EOF {
			t.Errorf("the stream went on after its close event: %v", err)
		}
	}
}

// TestEventStreamBigEvent: a run-log line over 1 MiB, cut to its first MiB, reaches the
// client as one message whose data is the whole event.
func TestEventStreamBigEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	prompt := `printf '{"type":"big","x":"'; head -c 1200000 /dev/zero | tr '\0' a; printf '"}\n{"type":"after"}\n'`
	if r := e.do(t, "POST", "/api/sessions/s1/turns", ada, jsonBody(map[string]string{"prompt": prompt})); r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	s, r := e.getStream(t, ada, "/api/sessions/s1/events/stream", "")
	if s == nil {
		t.Fatalf("events/stream = %d %s", r.status, r.raw)
	}
	got := s.events(t, -1, "turn.finished", "seq")
	if len(got) != 4 || got[1].data["truncated"] != true || got[2].data["type"] != "after" {
		t.Fatalf("events: %d, want turn.started, the cut line, after, turn.finished", len(got))
	}
	if d, _ := got[1].data["data"].(string); len(d) != 1<<20 {
		t.Errorf("the cut line's data has %d bytes, want 1 MiB", len(d))
	}
}

// TestEventStreamShutdown: shutting the streams down ends an event stream with a close event
// saying so.
func TestEventStreamShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	s, r := e.getStream(t, ada, "/api/sessions/s1/events/stream", "")
	if s == nil {
		t.Fatalf("events/stream = %d %s", r.status, r.raw)
	}
	e.streams.Shutdown()
	ev, err := s.next()
	if err != nil || ev.name != "close" || ev.data["reason"] != "shutdown" {
		t.Fatalf("after shutdown: %v %v, want a close event with reason shutdown", ev, err)
	}
}
