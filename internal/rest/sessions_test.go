package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/runlogtest"
)

const sessionsTimeout = 60 * time.Second

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// waitState polls GET path until its state (or turn's state) is an end state.
func (e *env) waitEnded(t *testing.T, path, tok string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionsTimeout)
	defer cancel()
	for {
		r := e.do(t, "GET", path, tok, "")
		if st, _ := r.body["state"].(string); st == "done" || st == "failed" || st == "cancelled" {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s still %v at the deadline", path, r.body["state"])
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// allEvents pages through events with since and limit.
func (e *env) allEvents(t *testing.T, path, tok string, limit int) []map[string]any {
	t.Helper()
	var out []map[string]any
	since := 0.0
	for {
		r := e.do(t, "GET", path+"?since="+strconv.Itoa(int(since))+"&limit="+strconv.Itoa(limit), tok, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, r.status, r.raw)
		}
		evs, _ := r.body["events"].([]any)
		for _, ev := range evs {
			out = append(out, ev.(map[string]any))
		}
		next := r.body["next"].(float64)
		if len(evs) == 0 {
			return out
		}
		since = next
	}
}

func TestSessionTurnEventsOverREST(t *testing.T) {
	t.Parallel()
	log := runlogtest.Path(t, "codex_exec_edit_file-change_failed-command.jsonl")
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command", "env": {"API_KEY": "sk-secret"}}`)
	if r.status != http.StatusCreated || strings.Contains(r.raw, "sk-secret") {
		t.Fatalf("POST /api/sessions = %d %s (the env's value must never come back)", r.status, r.raw)
	}
	// The turn waits for the gate until the bad input below has been tried (the 409 needs it
	// running).
	gate, open := providertest.Gate(t)
	// Each line 2 ms after the last, paced by a read that times out on a FIFO nobody writes to
	// (a sleep would start a process per line).
	pace, _ := providertest.Gate(t)
	prompt := `printf '{"type":"key","set":%s}\n' "${API_KEY:+true}"; read _ < ` + gate + `; exec 3<> ` + pace + `; ` +
		`while IFS= read -r l; do printf '%s\n' "$l"; read -t 0.002 -u 3 _ || :; done < ` + log
	r = e.do(t, "POST", "/api/sessions/s1/turns", ada, jsonBody(map[string]string{"prompt": prompt}))
	if r.status != http.StatusAccepted || r.body["state"] != "queued" || r.body["id"] == "" {
		t.Fatalf("POST turns = %d %s; want 202 with the queued turn", r.status, r.raw)
	}
	turn := r.body["id"].(string)
	// Bad input, each with its status.
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/api/sessions/s1/turns", `{"prompt": "true"}`, http.StatusConflict},
		{"POST", "/api/sessions/nope/turns", `{"prompt": "true"}`, http.StatusNotFound},
		{"GET", "/api/sessions/nope/events", "", http.StatusNotFound},
		{"POST", "/api/sessions", `{"name": "s2", "sandbox": "box", "agent": "gpt-9"}`, http.StatusBadRequest},
		{"GET", "/api/sessions/s1/events?since=abc", "", http.StatusBadRequest},
		{"GET", "/api/sessions/s1/events?limit=0", "", http.StatusBadRequest},
		{"GET", "/api/sessions/s1/turns/turn_nope", "", http.StatusNotFound},
		{"POST", "/api/jobs", `{"prompt": "true", "agent": "command", "sandbox": {"name": "typo", "imgae": "x"}}`, http.StatusBadRequest},
		{"POST", "/api/jobs", `{"prompt": "a\u0000b", "agent": "command", "sandbox": "box"}`, http.StatusBadRequest},
	} {
		if got := e.do(t, c.method, c.path, ada, c.body); got.status != c.want {
			t.Errorf("%s %s %s = %d %s, want %d", c.method, c.path, c.body, got.status, got.raw, c.want)
		}
	}
	open()
	end := e.waitEnded(t, "/api/sessions/s1/turns/"+turn, ada)
	if end.body["state"] != "done" || end.body["exit_code"] != 0.0 {
		t.Errorf("turn ended %s, want done with exit code 0", end.raw)
	}
	if got := e.do(t, "POST", "/api/sessions/s1/turns", ada, `{"prompt": "  "}`); got.status != http.StatusBadRequest {
		t.Errorf("empty prompt = %d %s, want 400", got.status, got.raw)
	}
	evs := e.allEvents(t, "/api/sessions/s1/events", ada, 7)
	want, _ := os.ReadFile(log)
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	if len(evs) != len(lines)+3 { // turn.started, the env line, the log, turn.finished
		t.Fatalf("%d events, want %d", len(evs), len(lines)+3)
	}
	for i, ev := range evs {
		if ev["seq"] != float64(i+1) {
			t.Fatalf("event %d has seq %v", i, ev["seq"])
		}
	}
	if evs[0]["type"] != "turn.started" || evs[len(evs)-1]["type"] != "turn.finished" {
		t.Errorf("first %v, last %v", evs[0]["type"], evs[len(evs)-1]["type"])
	}
	if d, _ := json.Marshal(evs[1]["data"]); string(d) != `{"set":true,"type":"key"}` {
		t.Errorf("the agent did not get its env: %s", d)
	}
	for i, l := range lines {
		var got, exp any
		d, _ := json.Marshal(evs[i+2]["data"])
		json.Unmarshal(d, &got)
		json.Unmarshal(l, &exp)
		if jsonBody(got) != jsonBody(exp) {
			t.Fatalf("event %d = %s, want line %d %s", i+3, d, i+1, l)
		}
	}
}

func TestJobsOverREST(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, jobs := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	_, jobs2 := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	r := e.do(t, "POST", "/api/jobs", jobs, `{"prompt": "echo '{\"type\":\"hi\"}'", "agent": "command", "sandbox": {"name": "jobbox"}}`)
	if r.status != http.StatusCreated || r.body["sandbox_created"] != true {
		t.Fatalf("POST /api/jobs = %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	end := e.waitEnded(t, "/api/jobs/"+id, jobs)
	if end.body["state"] != "done" {
		t.Errorf("job ended %s", end.raw)
	}
	evs := e.allEvents(t, "/api/jobs/"+id+"/events", jobs, 100)
	if len(evs) != 3 || evs[1]["job_seq"] != 2.0 || evs[1]["type"] != "hi" {
		t.Errorf("job events = %v", evs)
	}
	for _, c := range []struct {
		tok, path string
		want      int
	}{
		{jobs2, "/api/jobs/" + id, http.StatusNotFound},
		{jobs2, "/api/jobs/" + id + "/events", http.StatusNotFound},
		{jobs, "/api/sessions", http.StatusForbidden},
		{jobs, "/api/sandboxes", http.StatusForbidden},
		{ada, "/api/jobs/" + id, http.StatusOK},
	} {
		if got := e.do(t, "GET", c.path, c.tok, ""); got.status != c.want {
			t.Errorf("GET %s = %d %s, want %d", c.path, got.status, got.raw, c.want)
		}
	}
	if r := e.do(t, "GET", "/api/jobs", jobs2, ""); r.status != http.StatusOK || strings.Contains(r.raw, id) {
		t.Errorf("another jobs token's list = %d %s; want 200 without %s", r.status, r.raw, id)
	}
	// A sandbox to make without a name is named after the job.
	r = e.do(t, "POST", "/api/jobs", jobs, `{"prompt": "echo '{\"type\":\"hi\"}'", "agent": "command", "sandbox": {}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/jobs with a sandbox spec without a name = %d %s", r.status, r.raw)
	}
	if id, sb := r.body["id"].(string), r.body["sandbox"]; sb != "job-"+strings.TrimPrefix(id, "job_") {
		t.Errorf("job %s made sandbox %v, want job-%s", id, sb, strings.TrimPrefix(id, "job_"))
	}
}

// turnsFixtures are the isolation matrix's session, turn and job, made once per world.
var turnsFixtures = map[*world]map[string]string{}

// turnsPlaceholder makes (or returns) the isolation matrix's {ses}, {turn}, {job}, and a fresh
// {fses} each time. A session is given by its id: a name resolves among the caller's own
// sessions only (an admin reaches another user's by its id), so the id is what every column
// can be asked about.
func (w *world) turnsPlaceholder(t *testing.T, name string) string {
	t.Helper()
	owner := w.tokens[ownerCol]
	if name == "{fses}" {
		n := w.name("ses")
		r := w.e.do(t, "POST", "/api/sessions", owner, `{"name": "`+n+`", "sandbox": "ada-box", "agent": "command"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("create session = %d %s", r.status, r.raw)
		}
		return r.body["id"].(string)
	}
	fx := turnsFixtures[w]
	if fx == nil {
		r := w.e.do(t, "POST", "/api/sessions", owner, `{"name": "ada-ses", "sandbox": "ada-box", "agent": "command"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("create session = %d %s", r.status, r.raw)
		}
		fx = map[string]string{"{ses}": r.body["id"].(string)}
		r = w.e.do(t, "POST", "/api/sessions/ada-ses/turns", owner, `{"prompt": "echo '{}'"}`)
		if r.status != http.StatusAccepted {
			t.Fatalf("start turn = %d %s", r.status, r.raw)
		}
		fx["{turn}"] = r.body["id"].(string)
		w.e.waitEnded(t, "/api/sessions/ada-ses/turns/"+fx["{turn}"], owner)
		r = w.e.do(t, "POST", "/api/jobs", w.tokens[jobsOnlyCol], `{"prompt": "true", "agent": "command", "sandbox": "ada-box"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("start job = %d %s", r.status, r.raw)
		}
		fx["{job}"] = r.body["id"].(string)
		turnsFixtures[w] = fx
		w.top.Cleanup(func() { delete(turnsFixtures, w) })
	}
	return fx[name]
}

// shellQuote makes a single-quoted shell word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestTurnInDocker runs a turn in a Docker sandbox (the mounted hangar as the harness, the
// run log followed through the container's daemon): a fixture log replayed line by line is
// recorded once and in order.
func TestTurnInDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	log := runlogtest.Path(t, "codex_exec_one-command_completed.jsonl")
	image, err := dockertest.EnsureImage(context.Background(), dockertest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(log)
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	var prompt strings.Builder
	for _, l := range lines {
		prompt.WriteString("printf '%s\\n' " + shellQuote(string(l)) + "; sleep 0.05\n")
	}
	e := newEnv(t)
	e.sandbox(t, e.admin, "dock", `, "provider": "docker", "image": "`+image+`"`)
	if r := e.do(t, "POST", "/api/sessions", e.admin, `{"name": "d1", "sandbox": "dock", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	r := e.do(t, "POST", "/api/sessions/d1/turns", e.admin, jsonBody(map[string]string{"prompt": prompt.String()}))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	end := e.waitEnded(t, "/api/sessions/d1/turns/"+r.body["id"].(string), e.admin)
	if end.body["state"] != "done" {
		t.Fatalf("turn ended %s", end.raw)
	}
	evs := e.allEvents(t, "/api/sessions/d1/events", e.admin, 100)
	if len(evs) != len(lines)+2 {
		t.Fatalf("%d events, want %d", len(evs), len(lines)+2)
	}
	for i, l := range lines {
		var exp any
		json.Unmarshal(l, &exp)
		if jsonBody(evs[i+1]["data"]) != jsonBody(exp) {
			t.Errorf("event %d = %v, want %s", i+2, evs[i+1]["data"], l)
		}
	}
}

// TestTurnWithoutDaemon: a sandbox without a daemon runs the harness through the provider's
// exec and its run log is polled (following needs a daemon).
func TestTurnWithoutDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "plain", `, "daemon": false`)
	if r := e.do(t, "POST", "/api/sessions", e.admin, `{"name": "p1", "sandbox": "plain", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	r := e.do(t, "POST", "/api/sessions/p1/turns", e.admin, jsonBody(map[string]string{"prompt": `for i in 1 2 3; do printf '{"type":"n","i":%d}\n' $i; done; exit 4`}))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	end := e.waitEnded(t, "/api/sessions/p1/turns/"+r.body["id"].(string), e.admin)
	if end.body["state"] != "failed" || end.body["exit_code"] != 4.0 {
		t.Errorf("turn ended %s, want failed with exit code 4", end.raw)
	}
	evs := e.allEvents(t, "/api/sessions/p1/events", e.admin, 100)
	if len(evs) != 5 || jsonBody(evs[3]["data"]) != `{"i":3,"type":"n"}` {
		t.Errorf("events = %v", evs)
	}
}

// TestSessionNamesPerOwnerOverREST: ada and bob each make a session "fix-bug"; each URL with the
// name reaches the caller's own; an admin reaches either by its id, and by the name only its
// own (it has none: 404).
func TestSessionNamesPerOwnerOverREST(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)
	e.sandbox(t, ada, "adabox", "")
	e.sandbox(t, bob, "bobbox", "")
	ids := map[string]string{}
	for tok, box := range map[string]string{ada: "adabox", bob: "bobbox"} {
		r := e.do(t, "POST", "/api/sessions", tok, `{"name": "fix-bug", "sandbox": "`+box+`", "agent": "command"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("POST /api/sessions fix-bug in %s = %d %s", box, r.status, r.raw)
		}
		ids[tok] = r.body["id"].(string)
	}
	if r := e.do(t, "POST", "/api/sessions", bob, `{"name": "fix-bug", "sandbox": "bobbox", "agent": "command"}`); r.status != http.StatusConflict {
		t.Errorf("bob's second fix-bug = %d %s, want 409", r.status, r.raw)
	}
	for _, c := range []struct {
		tok, ref, want string
		status         int
	}{
		{ada, "fix-bug", ids[ada], http.StatusOK},
		{bob, "fix-bug", ids[bob], http.StatusOK},
		{e.admin, ids[ada], ids[ada], http.StatusOK},
		{e.admin, ids[bob], ids[bob], http.StatusOK},
		{e.admin, "fix-bug", "", http.StatusNotFound},
		{bob, ids[ada], "", http.StatusNotFound},
	} {
		r := e.do(t, "GET", "/api/sessions/"+c.ref, c.tok, "")
		if r.status != c.status || (c.want != "" && r.body["id"] != c.want) {
			t.Errorf("GET /api/sessions/%s = %d %s, want %d %s", c.ref, r.status, r.raw, c.status, c.want)
		}
	}
	if r := e.do(t, "GET", "/api/sessions", bob, ""); r.status != http.StatusOK || strings.Contains(r.raw, ids[ada]) {
		t.Errorf("bob's list = %d %s; want his own only", r.status, r.raw)
	}
}

// TestSplitBadInput: split_uid without split, or 0 (root), is refused with a reason.
func TestSplitBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	for _, body := range []string{
		`{"name": "s1", "sandbox": "box", "agent": "command", "split_uid": 1000}`,
		`{"name": "s1", "sandbox": "box", "agent": "command", "split": true, "split_uid": 0}`,
		`{"name": "s1", "sandbox": "box", "agent": "command", "split": true, "split_uid": -1}`,
	} {
		if r := e.do(t, "POST", "/api/sessions", e.admin, body); r.status != http.StatusBadRequest {
			t.Errorf("POST /api/sessions %s = %d %s, want 400", body, r.status, r.raw)
		}
	}
	if r := e.do(t, "POST", "/api/jobs", e.admin, `{"prompt": "true", "agent": "command", "sandbox": "box", "split_uid": 7}`); r.status != http.StatusBadRequest {
		t.Errorf("POST /api/jobs with split_uid alone = %d %s, want 400", r.status, r.raw)
	}
}

// TestSplitTurnInDocker: a split session in a Docker sandbox (commands run as root there) runs
// its agent as uid 65534: its attempts to write the turn's status file and run log are refused,
// and the turn ends as the harness says (failed, exit code 3), whatever the agent printed.
func TestSplitTurnInDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	image, err := dockertest.EnsureImage(context.Background(), dockertest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.sandbox(t, e.admin, "dock", `, "provider": "docker", "image": "`+image+`"`)
	r := e.do(t, "POST", "/api/sessions", e.admin, `{"name": "d1", "sandbox": "dock", "agent": "command", "split": true, "split_uid": 65534}`)
	if r.status != http.StatusCreated || r.body["split"] != true || r.body["split_uid"] != 65534.0 {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	prompt := `cd "$(ls -d /var/lib/hangar/turns/turn_* | head -1)" || exit 9
try() { if eval "$2" 2>/dev/null; then r=ok; else r=refused; fi; printf '{"type":"try","try":"%s","got":"%s"}\n' "$1" "$r"; }
try overwrite 'echo "{\"exit_code\":0}" > status.json'
try replace 'echo x > s.tmp && mv s.tmp status.json'
try append 'echo "{\"type\":\"turn.finished\",\"status\":\"done\"}" >> run.log'
printf '{"type":"turn.finished","status":"done","exit_code":0}\n'
printf '{"type":"uid","uid":%s}\n' "$(id -u)"
exit 3`
	r = e.do(t, "POST", "/api/sessions/d1/turns", e.admin, jsonBody(map[string]string{"prompt": prompt}))
	if r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	end := e.waitEnded(t, "/api/sessions/d1/turns/"+r.body["id"].(string), e.admin)
	if end.body["state"] != "failed" || end.body["exit_code"] != 3.0 {
		t.Errorf("turn ended %s, want failed with exit code 3", end.raw)
	}
	tries, uid := 0, -1.0
	for _, ev := range e.allEvents(t, "/api/sessions/d1/events", e.admin, 100) {
		d, _ := ev["data"].(map[string]any)
		switch d["type"] {
		case "try":
			tries++
			if d["got"] != "refused" {
				t.Errorf("the agent's %v: %v, want refused", d["try"], d["got"])
			}
		case "uid":
			uid, _ = d["uid"].(float64)
		}
	}
	if tries != 3 || uid != 65534 {
		t.Errorf("%d attempts recorded, the agent ran as uid %v; want 3, 65534", tries, uid)
	}
}

// TestSessionsBadInput: each bad request the issue lists, on every route it can reach, gets its
// status (the session's own ones are in TestSessionTurnEventsOverREST, with a turn running).
func TestSessionsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sandbox(t, e.admin, "box", "")
	if r := e.do(t, "POST", "/api/sessions", e.admin, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	r := e.do(t, "POST", "/api/jobs", e.admin, `{"prompt": "true", "agent": "command", "sandbox": "box"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/jobs = %d %s", r.status, r.raw)
	}
	job := r.body["id"].(string)
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/api/sessions/nope", "", http.StatusNotFound},
		{"DELETE", "/api/sessions/nope", "", http.StatusNotFound},
		{"GET", "/api/sessions/nope/turns", "", http.StatusNotFound},
		{"POST", "/api/sessions/nope/turns/turn_x/cancel", "", http.StatusNotFound},
		{"POST", "/api/sessions/s1/turns/turn_x/cancel", "", http.StatusNotFound},
		{"GET", "/api/sessions/nope/events/stream", "", http.StatusNotFound},
		{"GET", "/api/jobs/job_nope", "", http.StatusNotFound},
		{"POST", "/api/jobs/job_nope/cancel", "", http.StatusNotFound},
		{"POST", "/api/sessions/s1/turns", `{"prompt": ""}`, http.StatusBadRequest},
		{"POST", "/api/sessions/s1/turns", `{}`, http.StatusBadRequest},
		{"POST", "/api/jobs", `{"prompt": "", "agent": "command", "sandbox": "box"}`, http.StatusBadRequest},
		{"POST", "/api/jobs", `{"prompt": "true", "agent": "gpt-9", "sandbox": "box"}`, http.StatusBadRequest},
		{"POST", "/api/sessions", `{"name": "s2", "sandbox": "box", "agent": ""}`, http.StatusBadRequest},
		{"POST", "/api/sessions", `{"name": "s2", "sandbox": "nope", "agent": "command"}`, http.StatusNotFound},
		{"GET", "/api/sessions/s1/events?since=-1", "", http.StatusBadRequest},
		{"GET", "/api/sessions/s1/events?since=1.5", "", http.StatusBadRequest},
		{"GET", "/api/sessions/s1/events?limit=many", "", http.StatusBadRequest},
		{"GET", "/api/sessions/s1/events/stream?since=abc", "", http.StatusBadRequest},
		{"GET", "/api/jobs/" + job + "/events?since=abc", "", http.StatusBadRequest},
		{"GET", "/api/jobs/" + job + "/events/stream?since=abc", "", http.StatusBadRequest},
	} {
		if got := e.do(t, c.method, c.path, e.admin, c.body); got.status != c.want {
			t.Errorf("%s %s %s = %d %s, want %d", c.method, c.path, c.body, got.status, got.raw, c.want)
		}
	}
	e.waitEnded(t, "/api/jobs/"+job, e.admin)
}

// TestJobWithoutSandbox: POST /api/jobs with no body, or a body without a sandbox, is a 400
// that says what to send, never the decoder's "EOF"; so is any JSON POST with no body.
func TestJobWithoutSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		path, body, says string
	}{
		{"/api/jobs", "", "The request has no body: send a JSON object with the fields this endpoint takes (prompt, agent, sandbox, env, split, split_uid)."},
		{"/api/jobs", " \n", "The request has no body"},
		{"/api/jobs", `{"prompt": "true", "agent": "command"}`, "Say which sandbox the job runs in"},
		{"/api/jobs", `{"prompt": "true", "agent": "command", "sandbox": null}`, "Say which sandbox the job runs in"},
		{"/api/sandboxes", "", "The request has no body: send a JSON object with the fields this endpoint takes (name,"},
		{"/api/tokens", "", "The request has no body"},
	} {
		r := e.do(t, "POST", c.path, e.admin, c.body)
		wantError(t, r, http.StatusBadRequest, "bad_request")
		er, _ := r.body["error"].(map[string]any)
		if msg, _ := er["message"].(string); !strings.HasPrefix(msg, c.says) || strings.Contains(r.raw, "EOF") {
			t.Errorf("POST %s %q = %s, want a message that starts %q", c.path, c.body, r.raw, c.says)
		}
	}
}
