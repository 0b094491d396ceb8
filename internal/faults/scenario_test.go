package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/store/postgres/pgtest"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// Named timeouts of the suite. Bounds a piece of work must meet are in the expectations
// (faults_test.go); these bound the test's own waiting.
const (
	// startTimeout bounds hangar's start, a sandbox's creation and the work's first output
	// (a Docker sandbox on a busy 2-core machine takes seconds).
	startTimeout = 60 * time.Second
	// grace is how long past its bound the suite goes on watching a piece of work, so a late
	// end is reported with the time it took rather than as "never".
	grace = 5 * time.Second
	// goesOnWindow is how long after the fault work that should go on is watched before it is
	// judged: long enough for several of its outputs (every 0.2 s).
	goesOnWindow = 3 * time.Second
	// endBound is the bound: work ends within it after hangar can know of the fault,
	// and a cancel within it whatever the sandbox's state.
	endBound = 10 * time.Second
	// tick is how often the suite looks at what it is waiting for.
	tick = 50 * time.Millisecond
)

// scenario is one fault on one provider: a hangar, a sandbox, and the six kinds of work open
// in it.
type scenario struct {
	t        *testing.T
	fault    string // the fault's name
	provider string
	name     string // the sandbox's name, unique on this machine (Docker containers are named after it)
	marker   string // in the command line of every process the agent starts
	workTag  string // in the command line of the background process and the streamed exec
	dir      string // hangar's data dir
	image    string // docker: the sandbox's image
	docker   *client.Client
	serve    *providertest.Serve
	token    string
	client   *http.Client

	sandbox map[string]any // the sandbox as created
	turnID  string
	jobID   string
	procID  string
	feeds   map[kind]*feed
	polls   map[kind]*poller
	ctx     context.Context // ends when the test does: every reader and poller stops
	pg      *pgtest.Server  // the private PostgreSQL, when the fault needs one
	undo    func()          // heals the fault (frees the disk, restores a limit, restarts PostgreSQL)
}

// newScenario makes the scenario's folders and everything that must outlive hangar; the fault's
// prepare runs here, before hangar starts.
func newScenario(t *testing.T, f fault, provider string) *scenario {
	s := &scenario{t: t, fault: f.name, provider: provider, client: &http.Client{},
		name: "fault-" + f.name + "-" + provider, marker: "hfault" + providertest.RandHex(6), workTag: "hwork" + providertest.RandHex(6),
		feeds: map[kind]*feed{}, polls: map[kind]*poller{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx
	t.Cleanup(cancel)
	if provider == "docker" {
		s.docker = dockertest.Client(t)
		image, err := dockertest.EnsureImage(context.Background(), s.docker)
		if err != nil {
			t.Fatal(err)
		}
		s.image = image
	}
	// Not t.TempDir: the fault may mount a file system on it, and PostgreSQL's user must
	// reach it.
	dir, err := os.MkdirTemp("", "hangar-faults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s.dir = filepath.Join(dir, "data")
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Runs before the folder goes (cleanups run last first): whatever the test left of the
	// agent's processes and the sandbox's daemon.
	t.Cleanup(func() { s.sweep() })
	return s
}

// start runs hangar serve with args and reads its admin token.
func (s *scenario) start(args ...string) {
	t := s.t
	t.Helper()
	srv, err := providertest.NewServe(hangarBin, s.dir, append([]string{"--log-level", "debug"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.serve = srv
	t.Cleanup(func() {
		srv.Stop()
		if t.Failed() {
			t.Logf("hangar's log:\n%s", providertest.LastLines(srv.Logs.String(), 60))
		}
	})
	s.restart()
	if s.token, err = srv.AdminToken(); err != nil {
		t.Fatal(err)
	}
}

// restart starts hangar (again) and waits for its /readyz.
func (s *scenario) restart() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.serve.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// open makes the sandbox and opens the six kinds of work in it, and waits until each has
// shown output.
func (s *scenario) open() {
	t := s.t
	t.Helper()
	spec := map[string]any{"name": s.name}
	if s.provider == "docker" {
		spec["provider"], spec["image"] = "docker", s.image
	}
	s.sandbox = s.must("POST", "/api/sandboxes", spec)
	s.must("POST", "/api/sessions", map[string]any{"name": "agent", "sandbox": s.name, "agent": "command"})
	s.turnID = providertest.Str(s.must("POST", "/api/sessions/agent/turns", map[string]any{"prompt": s.agentScript("turn")})["id"])
	s.jobID = providertest.Str(s.must("POST", "/api/jobs", map[string]any{"prompt": s.agentScript("job"), "agent": "command", "sandbox": s.name})["id"])
	// The process writes a file each tick, for the watch to see.
	s.procID = providertest.Str(s.must("POST", "/api/sandboxes/"+s.name+"/processes",
		map[string]any{"command": "while :; do echo tick; date > watched.txt; sleep 0.2; done # " + s.workTag})["process_id"])

	s.polls[kindTurn] = s.poll("/api/sessions/agent/turns/"+s.turnID, false)
	s.polls[kindJob] = s.poll("/api/jobs/"+s.jobID, true)
	s.feeds[kindAttach] = s.openFeed("GET", "/api/sandboxes/"+s.name+"/processes/"+s.procID+"/stream", nil, "")
	s.feeds[kindExec] = s.openFeed("POST", "/api/sandboxes/"+s.name+"/exec/stream",
		map[string]any{"command": "while :; do echo tick; sleep 0.2; done # " + s.workTag, "timeout": 300}, "")
	s.feeds[kindWatch] = s.openFeed("GET", "/api/sandboxes/"+s.name+"/watch?path=.", nil, "")
	s.feeds[kindEvents] = s.openFeed("GET", "/api/sessions/agent/events/stream", nil, "")

	waitFor(t, startTimeout, "every kind of work to show output", func() bool {
		return s.feeds[kindEvents].count("message", "tick") >= 2 && s.feeds[kindAttach].count("output", "") > 0 &&
			s.feeds[kindExec].count("stdout", "") > 0 && s.feeds[kindWatch].count("message", "") > 0 &&
			s.polls[kindTurn].look(time.Now()).saw == "running" && s.polls[kindJob].look(time.Now()).saw == "running"
	})
}

// agentScript is a turn's prompt (bash -c): it starts three processes a harness must still
// end (one in a session of its own, one orphaned by a double fork, one that ignores SIGTERM),
// each with the scenario's marker in its command line, then prints a tick a line every 0.2 s.
func (s *scenario) agentScript(what string) string {
	m := s.marker + "-" + what
	return fmt.Sprintf(`m=%s
setsid sh -c 'while :; do sleep 1; done' $m-setsid </dev/null >/dev/null 2>&1 &
( sh -c 'while :; do sleep 1; done' $m-orphan </dev/null >/dev/null 2>&1 & )
sh -c 'trap "" TERM; while :; do sleep 1; done' $m-noterm </dev/null >/dev/null 2>&1 &
i=0; while :; do i=$((i+1)); printf '{"type":"tick","n":%%d}\n' $i; sleep 0.2; done`, m)
}

// must sends a JSON request and fails the test unless hangar answers 2xx; it returns the
// answer's JSON object.
func (s *scenario) must(method, path string, body any) map[string]any {
	s.t.Helper()
	status, _, raw, err := s.call(method, path, body)
	if err != nil || status/100 != 2 {
		s.t.Fatalf("%s %s = %d %s %v", method, path, status, raw, err)
	}
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}

// call sends a JSON request (body nil: none) with the admin token and returns the answer.
func (s *scenario) call(method, path string, body any) (int, http.Header, []byte, error) {
	return s.callCtx(s.ctx, method, path, body)
}

// callCtx is call under ctx.
func (s *scenario) callCtx(ctx context.Context, method, path string, body any) (int, http.Header, []byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.serve.URL+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, nil
}

// answer is a request's status as the table shows it: "503 retry-after: <message>".
func (s *scenario) answer(method, path string, body any) string {
	status, h, raw, err := s.call(method, path, body)
	if err != nil {
		return "no answer: " + err.Error()
	}
	out := strconv.Itoa(status)
	if h.Get("Retry-After") != "" {
		out += " retry-after"
	}
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		out += ": " + e.Error.Message
	}
	return out
}

// sighting is what a client saw of one piece of work since the fault, as one line the
// expectations match: "close: destroyed", "failed: <reason>", "dropped", "goes on", ...
type sighting struct {
	saw   string
	ended bool
	after time.Duration // from the fault to its end
}

// event is one Server-Sent Event as the suite read it.
type event struct {
	id   string
	name string // "message" for a plain one
	data map[string]any
	at   time.Time
}

// feed is one SSE stream the suite reads to its end.
type feed struct {
	mu     sync.Mutex // guards the fields below
	events []event
	final  *event // close, end, result or error: the stream's last word
	done   bool   // the stream ended (with or without a last word)
	doneAt time.Time
	err    error
}

// openFeed opens an SSE stream and reads it on a goroutine until it ends or the test does.
func (s *scenario) openFeed(method, path string, body any, lastID string) *feed {
	t := s.t
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	// The feed's own context: its cancel must run before the wait for its reader below
	// (cleanups run last first), and s.ctx's is registered before both.
	ctx, cancel := context.WithCancel(s.ctx)
	req, err := http.NewRequestWithContext(ctx, method, s.serve.URL+path, r)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, raw)
	}
	f := &feed{}
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	go func() {
		defer wg.Done()
		defer resp.Body.Close()
		err := benchkit.SSEEventsWithID(resp.Body, func(id, name string, data []byte) error {
			ev := event{id: id, name: name, at: time.Now()}
			if ev.name == "" {
				ev.name = "message"
			}
			json.Unmarshal(data, &ev.data)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, ev)
			switch ev.name {
			case "close", "end", "result", "error":
				f.final = &f.events[len(f.events)-1]
			}
			return nil
		})
		f.mu.Lock()
		f.done, f.doneAt, f.err = true, time.Now(), err
		f.mu.Unlock()
	}()
	return f
}

// count is how many events of name the feed had (of type typ, when not empty).
func (f *feed) count(name, typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ev := range f.events {
		if ev.name == name && (typ == "" || ev.data["type"] == typ) {
			n++
		}
	}
	return n
}

// look is what the feed's client has seen since t0.
func (f *feed) look(t0 time.Time) sighting {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.final != nil:
		return sighting{saw: lastWord(*f.final), ended: true, after: f.final.at.Sub(t0)}
	case f.done:
		return sighting{saw: "dropped", ended: true, after: f.doneAt.Sub(t0)}
	}
	for _, ev := range f.events {
		if ev.at.After(t0) {
			return sighting{saw: "goes on"}
		}
	}
	return sighting{saw: "open"}
}

// lastWord is a stream's last event as a sighting shows it.
func lastWord(ev event) string {
	d := ev.data
	switch ev.name {
	case "close":
		return "close: " + providertest.Str(d["reason"])
	case "end":
		return "end: " + providertest.Str(d["state"]) + ": " + providertest.Str(d["status"])
	case "result":
		out := "result:"
		if c := providertest.Str(d["closed"]); c != "" {
			out += " closed " + c + ","
		}
		code := providertest.Str(d["exit_code"])
		if code == "" {
			code = "null"
		}
		return out + " exit_code " + code + ", " + providertest.Str(d["status"])
	}
	return ev.name + ": " + providertest.Str(d["code"]) + ": " + providertest.Str(d["message"])
}

// poller follows a turn or a job by reading it every 100 ms.
type poller struct {
	mu     sync.Mutex // guards the fields below
	state  string
	reason string
	status int // of the last read
	retry  bool
	endAt  time.Time
}

// poll starts reading path (a turn, or a job when job) until the turn ends or the test does.
func (s *scenario) poll(path string, job bool) *poller {
	p := &poller{}
	var wg sync.WaitGroup
	wg.Add(1)
	s.t.Cleanup(wg.Wait)
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(cancel)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			status, h, raw, _ := s.callCtx(ctx, "GET", path, nil)
			var turn struct {
				State, Reason string
				Turn          *struct{ State, Reason string }
			}
			json.Unmarshal(raw, &turn)
			if job && turn.Turn != nil {
				turn.Reason = turn.Turn.Reason
			}
			p.mu.Lock()
			p.status, p.retry = status, h.Get("Retry-After") != ""
			ended := false
			if status == http.StatusOK {
				p.state, p.reason = turn.State, turn.Reason
				if ended = turn.State == "done" || turn.State == "failed" || turn.State == "cancelled"; ended {
					p.endAt = time.Now()
				}
			}
			p.mu.Unlock()
			if ended {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return p
}

// look is what a client reading the turn has seen since t0.
func (p *poller) look(t0 time.Time) sighting {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.endAt.IsZero():
		return sighting{saw: p.state + ": " + p.reason, ended: true, after: p.endAt.Sub(t0)}
	case p.status != http.StatusOK:
		s := strconv.Itoa(p.status)
		if p.retry {
			s += " retry-after"
		}
		return sighting{saw: s}
	}
	return sighting{saw: p.state}
}

// look is what the client of k has seen since t0.
func (s *scenario) look(k kind, t0 time.Time) sighting {
	if f := s.feeds[k]; f != nil {
		return f.look(t0)
	}
	return s.polls[k].look(t0)
}

// waitFor and poll look every tick.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	providertest.WaitFor(t, d, tick, what, cond)
}

func poll(d time.Duration, cond func() bool) bool { return providertest.Poll(d, tick, cond) }
