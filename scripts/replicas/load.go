package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// retryPause is how long a worker waits before it tries again after a refusal or a broken
// stream: a client's back-off, so that a replica that refuses is not hammered.
const retryPause = 200 * time.Millisecond

// Commands the load runs in the sandboxes. Each prints numbered lines, so the checker can tell
// a missing or repeated one.
const (
	execLines    = 20
	execCommand  = `for i in $(seq 1 20); do echo $i; sleep 0.1; done; : > w-$$-$RANDOM`
	shortLines   = 30
	shortCommand = `for i in $(seq 1 30); do echo $i; sleep 0.1; done`
	// longCommand runs until the drain makes stop-long in the workdir (or 3,000 lines, 5
	// minutes and more: it ends by itself).
	longCommand = `i=0; while [ $i -lt 3000 ] && [ ! -e stop-long ]; do i=$((i+1)); echo $i; sleep 0.1; done`
)

// progress counts what the load got done: phases wait on it (load that moves again after a
// restart) instead of on the clock.
type progress struct {
	execs      atomic.Int64 // streamed execs that ended with their result
	turnEvents atomic.Int64 // session events delivered to the readers
	output     atomic.Int64 // output events delivered to attachers
}

// load is every worker of a run and what they saw.
type load struct {
	c        *client
	prog     *progress
	stopping atomic.Bool // the drain: workers finish what they are at and start nothing new

	mu     sync.Mutex // guards the fields below
	execs  execStats
	procs  []*procRun
	turns  []*sessionRun
	watch  streamStats
	fleet  streamStats
	mcp    mcpStats
	probes []string // problems outside the checkers (a start that never succeeded)
}

type execStats struct {
	Started  int      `json:"started"`
	Complete int      `json:"complete"`
	Shutdown int      `json:"ended_by_shutdown"`
	Broken   int      `json:"broken"`
	Other    int      `json:"other_end"`
	Refused  int      `json:"refused"`
	Problems []string `json:"problems,omitempty"`
}

type streamStats struct {
	Connects int `json:"connects"`
	Events   int `json:"events"`
	Gaps     int `json:"gaps"`
	Closes   int `json:"closes"`
}

func (l *load) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.probes) < 50 {
		l.probes = append(l.probes, fmt.Sprintf(format, args...))
	}
}

// execWorker runs streamed execs in sb one after another until the drain.
func (l *load) execWorker(ctx context.Context, sb string) {
	body := fmt.Sprintf(`{"command":%q,"timeout":60}`, execCommand)
	for !l.stopping.Load() && ctx.Err() == nil {
		l.mu.Lock()
		l.execs.Started++
		l.mu.Unlock()
		resp, err := l.c.do(ctx, "exec", "POST", "/api/sandboxes/"+sb+"/exec/stream", body)
		if err != nil {
			l.mu.Lock()
			l.execs.Refused++
			l.mu.Unlock()
			pause(ctx, retryPause)
			continue
		}
		phase := l.c.ph.get()
		var out []byte
		var result map[string]any
		benchkit.SSEEvents(resp.Body, func(name string, data []byte) error {
			switch name {
			case "stdout":
				var o struct{ Data string }
				json.Unmarshal(data, &o)
				out = append(out, o.Data...)
			case "result":
				json.Unmarshal(data, &result)
			}
			return nil
		})
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		var cerr error
		switch {
		case result == nil:
			l.execs.Broken++
			l.c.tl.brokenStream(l.c.ph.get(), "exec")
			cerr = countCheck(string(out), execLines, false)
		case result["exit_code"] == 0.0:
			l.execs.Complete++
			l.prog.execs.Add(1)
			cerr = countCheck(string(out), execLines, true)
		case result["closed"] == "shutdown":
			l.execs.Shutdown++
			l.prog.execs.Add(1)
			cerr = countCheck(string(out), execLines, false)
		default:
			l.execs.Other++
			cerr = fmt.Errorf("ended with %v", result)
		}
		if cerr != nil && len(l.execs.Problems) < 20 {
			l.execs.Problems = append(l.execs.Problems, fmt.Sprintf("exec in %s (%s): %v", sb, phase, cerr))
		}
		l.mu.Unlock()
	}
}

// procRun is one background process and its attacher's check.
type procRun struct {
	Sandbox   string `json:"sandbox"`
	ID        string `json:"process_id"`
	Long      bool   `json:"long"`
	Attaches  int    `json:"attaches"`
	Lines     int    `json:"lines"`
	Gaps      int    `json:"gaps"`
	LostLines int    `json:"lost_lines"`
	Ended     bool   `json:"ended"`
	Problems  []string
	check     outputCheck
}

// startProcess starts command in sb, trying again (a client's retry) after a refusal until ctx
// ends.
func (l *load) startProcess(ctx context.Context, sb, command string) (string, error) {
	body := fmt.Sprintf(`{"command":%q}`, command)
	for {
		var p struct {
			ID string `json:"process_id"`
		}
		err := l.c.json(ctx, "process", "POST", "/api/sandboxes/"+sb+"/processes", body, &p)
		if err == nil {
			return p.ID, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		pause(ctx, retryPause)
	}
}

// attach follows a process's output until its end (or ctx's), reattaching with Last-Event-ID
// whenever a stream ends without it.
func (l *load) attach(ctx context.Context, pr *procRun) {
	for ctx.Err() == nil && !pr.check.ended {
		var hdr []string
		if pr.check.next > 0 {
			hdr = []string{"Last-Event-ID", strconv.FormatInt(pr.check.next, 10)}
		}
		l.mu.Lock()
		pr.Attaches++
		l.mu.Unlock()
		resp, err := l.c.do(ctx, "attach", "GET", "/api/sandboxes/"+pr.Sandbox+"/processes/"+pr.ID+"/stream", "", hdr...)
		if err != nil {
			pause(ctx, retryPause)
			continue
		}
		closed := false
		benchkit.SSEEventsWithID(resp.Body, func(id, name string, data []byte) error {
			l.mu.Lock()
			pr.check.event(id, name, data)
			l.mu.Unlock()
			switch name {
			case "output":
				l.prog.output.Add(1)
			case "close":
				closed = true
			}
			return nil
		})
		resp.Body.Close()
		if !pr.check.ended && ctx.Err() == nil {
			if !closed {
				l.c.tl.brokenStream(l.c.ph.get(), "attach")
			}
			pause(ctx, retryPause)
		}
	}
}

// longProcess starts one process that runs until the drain and attaches to it.
func (l *load) longProcess(ctx context.Context, sb string) {
	id, err := l.startProcess(ctx, sb, longCommand)
	if err != nil {
		l.note("the long process in %s never started: %v", sb, err)
		return
	}
	pr := &procRun{Sandbox: sb, ID: id, Long: true}
	l.mu.Lock()
	l.procs = append(l.procs, pr)
	l.mu.Unlock()
	l.attach(ctx, pr)
}

// shortProcesses starts 3-second processes in sb one after another, each attached to its end,
// until the drain.
func (l *load) shortProcesses(ctx context.Context, sb string) {
	for !l.stopping.Load() && ctx.Err() == nil {
		id, err := l.startProcess(ctx, sb, shortCommand)
		if err != nil {
			return
		}
		pr := &procRun{Sandbox: sb, ID: id}
		l.mu.Lock()
		l.procs = append(l.procs, pr)
		l.mu.Unlock()
		l.attach(ctx, pr)
		l.mu.Lock()
		if pr.check.ended && pr.check.gaps == 0 && pr.check.last != shortLines {
			pr.check.problem("ended after line %d without a gap, want %d lines", pr.check.last, shortLines)
		}
		l.mu.Unlock()
	}
}

// sessionRun is one session: its turns, one after another, each replaying the fixture, and a
// reader of its events that resumes with Last-Event-ID wherever the proxy sends it.
type sessionRun struct {
	Name      string   `json:"session"`
	Sandbox   string   `json:"sandbox"`
	Turns     []string `json:"turns"`
	Statuses  map[string]string
	Stalled   []string `json:"stalled,omitempty"`
	Reconnect int      `json:"reconnects"`
	Problems  []string `json:"problems,omitempty"`

	endPhase  map[string]string // the phase each turn's turn.finished reached the reader in
	delivered []sessionEvent
	lastSeq   int64
	finished  chan finished
}

type sessionEvent struct {
	Seq  int64           `json:"seq"`
	Turn string          `json:"turn"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type finished struct{ turn, status string }

// turnTimeout bounds a turn's run from its start to its turn.finished at the reader: a turn
// replays in about 10 s, so one that takes this long was left without a watcher.
const turnTimeout = 60 * time.Second

// turnWorker starts the session's turns one after another until the drain.
func (l *load) turnWorker(ctx context.Context, s *sessionRun, prompt string) {
	body, _ := json.Marshal(map[string]string{"prompt": prompt})
	for !l.stopping.Load() && ctx.Err() == nil {
		var tu struct {
			ID string `json:"id"`
		}
		if err := l.c.json(ctx, "turn", "POST", "/api/sessions/"+s.Name+"/turns", string(body), &tu); err != nil {
			pause(ctx, retryPause)
			continue
		}
		l.mu.Lock()
		s.Turns = append(s.Turns, tu.ID)
		l.mu.Unlock()
		timeout := time.NewTimer(turnTimeout)
		for done := false; !done; {
			select {
			case f := <-s.finished:
				if f.turn == tu.ID {
					done = true
				}
			case <-timeout.C:
				l.mu.Lock()
				s.Stalled = append(s.Stalled, tu.ID)
				l.mu.Unlock()
				return // a turn still runs: no next turn can start
			case <-ctx.Done():
				return
			}
		}
		timeout.Stop()
	}
}

// readEvents reads the session's events until ctx ends, resuming after the last one it got.
func (l *load) readEvents(ctx context.Context, s *sessionRun) {
	for ctx.Err() == nil {
		var hdr []string
		if s.lastSeq > 0 {
			hdr = []string{"Last-Event-ID", strconv.FormatInt(s.lastSeq, 10)}
		}
		resp, err := l.c.do(ctx, "events", "GET", "/api/sessions/"+s.Name+"/events/stream", "", hdr...)
		if err != nil {
			pause(ctx, retryPause)
			continue
		}
		closed := false
		benchkit.SSEEvents(resp.Body, func(name string, data []byte) error {
			if name == "close" {
				closed = true
				return nil
			}
			var ev sessionEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				return err
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			switch {
			case ev.Seq <= s.lastSeq:
				s.problem("event %d delivered again after %d", ev.Seq, s.lastSeq)
			case ev.Seq != s.lastSeq+1:
				s.problem("events %d..%d not delivered (the next was %d)", s.lastSeq+1, ev.Seq-1, ev.Seq)
			}
			if ev.Seq > s.lastSeq {
				s.lastSeq = ev.Seq
				s.delivered = append(s.delivered, ev)
			}
			l.prog.turnEvents.Add(1)
			if ev.Type == "turn.finished" {
				var f struct{ Status string }
				json.Unmarshal(ev.Data, &f)
				s.Statuses[ev.Turn] = f.Status
				s.endPhase[ev.Turn] = l.c.ph.get()
				select {
				case s.finished <- finished{ev.Turn, f.Status}:
				default: // the worker waits for one turn at a time; a stale one is not its
				}
			}
			return nil
		})
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		s.Reconnect++
		l.mu.Unlock()
		if !closed {
			l.c.tl.brokenStream(l.c.ph.get(), "events")
		}
		pause(ctx, retryPause)
	}
}

func (s *sessionRun) problem(format string, args ...any) {
	if len(s.Problems) < 20 {
		s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
	}
}

// readStream reads an SSE stream that has no end of its own (a watch, the fleet) until ctx
// ends, reconnecting with Last-Event-ID after it closes or breaks.
func (l *load) readStream(ctx context.Context, kind, path string, st *streamStats) {
	last := ""
	for ctx.Err() == nil {
		var hdr []string
		if last != "" {
			hdr = []string{"Last-Event-ID", last}
		}
		resp, err := l.c.do(ctx, kind, "GET", path, "", hdr...)
		if err != nil {
			pause(ctx, retryPause)
			continue
		}
		l.mu.Lock()
		st.Connects++
		l.mu.Unlock()
		closed := false
		benchkit.SSEEventsWithID(resp.Body, func(id, name string, data []byte) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			switch name {
			case "close":
				closed = true
				st.Closes++
			case "gap":
				st.Gaps++
			default:
				st.Events++
			}
			if id != "" {
				last = id
			}
			return nil
		})
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		if !closed {
			l.c.tl.brokenStream(l.c.ph.get(), kind)
		}
		pause(ctx, retryPause)
	}
}

// getter makes light reads one after another until the drain: what a dashboard or a CLI
// does.
func (l *load) getter(ctx context.Context, sandboxes, sessions []string) {
	for i := 0; !l.stopping.Load() && ctx.Err() == nil; i++ {
		var err error
		switch i % 4 {
		case 0:
			err = l.c.json(ctx, "get", "GET", "/api/sandboxes", "", nil)
		case 1:
			err = l.c.json(ctx, "get", "GET", "/api/sessions/"+sessions[i%len(sessions)]+"/turns", "", nil)
		case 2:
			err = l.c.json(ctx, "get", "GET", "/api/sandboxes/"+sandboxes[i%len(sandboxes)]+"/processes", "", nil)
		case 3:
			err = l.c.json(ctx, "get", "GET", "/api/sessions/"+sessions[i%len(sessions)]+"/events?limit=10", "", nil)
		}
		var se *statusError
		if err != nil && !errors.As(err, &se) && ctx.Err() != nil {
			return
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// mcpStats is what the 2025-era MCP sessions saw: sessions opened, calls answered, and the
// answers 404 "no such session" — legitimate only when the replica that held the session is
// gone (rolled or killed: its id is no longer a running replica's), and then the client opens
// a new session, as the MCP specification says.
type mcpStats struct {
	Sessions   int      `json:"sessions"`
	Calls      int      `json:"calls"`
	GoneHolder int      `json:"not_found_holder_gone"`
	NotFound   int      `json:"not_found_holder_live"`
	BadAnswers int      `json:"bad_answers"`
	Problems   []string `json:"problems,omitempty"`
}

// mcpWorker keeps a 2025-era MCP session (Mcp-Session-Id) and calls the exec tool in sb through
// it, one call after another, until the drain: a session spread over every replica by the
// proxy, as behind a balancer with no affinity.
func (l *load) mcpWorker(ctx context.Context, sb string, live func() map[string]bool) {
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"chaos","version":"1"}}}`
	mcpHeaders := func(sid string) []string {
		h := []string{"Accept", "application/json, text/event-stream"}
		if sid != "" {
			h = append(h, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25")
		}
		return h
	}
	sid := ""
	for n := 1; !l.stopping.Load() && ctx.Err() == nil; n++ {
		if sid == "" {
			resp, err := l.c.do(ctx, "mcp", "POST", "/mcp", initialize, mcpHeaders("")...)
			if err != nil {
				pause(ctx, retryPause)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			sid = resp.Header.Get("Mcp-Session-Id")
			if sid == "" {
				l.mcpProblem("initialize answered no Mcp-Session-Id")
				pause(ctx, retryPause)
				continue
			}
			if resp, err := l.c.do(ctx, "mcp", "POST", "/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, mcpHeaders(sid)...); err == nil {
				resp.Body.Close()
			}
			l.mu.Lock()
			l.mcp.Sessions++
			l.mu.Unlock()
		}
		word := fmt.Sprintf("mcp-%d", n)
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"sandbox":%q,"command":"echo %s"}}}`, n, sb, word)
		resp, err := l.c.do(ctx, "mcp", "POST", "/mcp", call, mcpHeaders(sid)...)
		var se *statusError
		if errors.As(err, &se) && se.code == http.StatusNotFound {
			// A session id that names its holder (<replica id>.<session>) is gone with it; one
			// that names none was not found where the request landed.
			holder, _, named := strings.Cut(sid, ".")
			l.mu.Lock()
			if !named || live()[holder] {
				l.mcp.NotFound++
				if l.mcp.NotFound <= 3 {
					l.mcp.Problems = append(l.mcp.Problems, fmt.Sprintf("session %s (its holder live, or not named) answered 404 in the %s phase: %s", sid, l.c.ph.get(), se.msg))
				}
			} else {
				l.mcp.GoneHolder++
			}
			l.mu.Unlock()
			sid = "" // the session is gone: open another
			continue
		}
		if err != nil {
			pause(ctx, retryPause)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		l.mu.Lock()
		l.mcp.Calls++
		if !strings.Contains(string(b), word) || strings.Contains(string(b), `"isError":true`) {
			l.mcp.BadAnswers++
			if l.mcp.BadAnswers <= 5 {
				l.mcp.Problems = append(l.mcp.Problems, fmt.Sprintf("exec %s in the %s phase answered %d %s %q", word, l.c.ph.get(), resp.StatusCode, resp.Header.Get("Content-Type"), truncate(string(b), 400)))
			}
		}
		l.mu.Unlock()
		pause(ctx, 100*time.Millisecond)
	}
}

func (l *load) mcpProblem(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mcp.Problems) < 10 {
		l.mcp.Problems = append(l.mcp.Problems, s)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
