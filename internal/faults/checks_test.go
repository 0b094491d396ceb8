package faults_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// ticks is the highest tick of the turn the feed (the session's event stream) delivered.
func (f *feed) ticks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ev := range f.events {
		if ev.name == "message" && ev.data["type"] == "tick" {
			if d, ok := ev.data["data"].(map[string]any); ok {
				n = max(n, int(d["n"].(float64)))
			}
		}
	}
	return n
}

// lastID is the id of the last event of name the feed delivered.
func (f *feed) lastID(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.events) - 1; i >= 0; i-- {
		if f.events[i].name == name && f.events[i].id != "" {
			return f.events[i].id
		}
	}
	return ""
}

// first is the feed's first event, once it has one.
func (f *feed) first() (event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) == 0 {
		return event{}, false
	}
	return f.events[0], true
}

// checkResume is what a client does after hangar came back: the session's event stream
// resumed with Last-Event-ID goes on with the very next event (no gap, no repeat), and the
// attach resumed with Last-Event-ID goes on past its offset, a gap event first if output was
// lost meanwhile.
func (s *scenario) checkResume() {
	t := s.t
	t.Helper()
	last := s.feeds[kindEvents].lastID("message")
	events := s.openFeed("GET", "/api/sessions/agent/events/stream", nil, last)
	if !poll(endBound, func() bool { _, ok := events.first(); return ok }) {
		t.Errorf("events: resumed after %s, nothing came within %s (the turn does not go on?)", last, endBound)
	} else if ev, _ := events.first(); ev.name != "message" || ev.id != inc(last) {
		t.Errorf("events: resumed after %s, the first event is %s %s %v, want the message with id %s", last, ev.name, ev.id, ev.data, inc(last))
	}

	off := s.feeds[kindAttach].lastID("output")
	attach := s.openFeed("GET", "/api/sandboxes/"+s.name+"/processes/"+s.procID+"/stream", nil, off)
	if !poll(endBound, func() bool { _, ok := attach.first(); return ok }) {
		t.Errorf("attach: resumed from offset %s, nothing came within %s", off, endBound)
		return
	}
	ev, _ := attach.first()
	from, _ := strconv.ParseInt(off, 10, 64)
	id, _ := strconv.ParseInt(ev.id, 10, 64)
	switch {
	case ev.name == "gap":
		if providertest.Str(ev.data["from"]) != off {
			t.Errorf("attach: resumed from offset %s, got a gap %v: want it to start there", off, ev.data)
		}
	case ev.name != "output" || id <= from:
		t.Errorf("attach: resumed from offset %s, the first event is %s id %s %v: want output past it, or a gap saying what was lost", off, ev.name, ev.id, ev.data)
	}
}

// inc is a numeric id plus one.
func inc(id string) string {
	n, _ := strconv.ParseInt(id, 10, 64)
	return strconv.FormatInt(n+1, 10)
}

// end ends what still runs, as a person would (a cancel, which must work whatever the
// sandbox's state), then checks that no process of the agents is left, and destroys the
// sandbox.
func (s *scenario) end() {
	t := s.t
	t.Helper()
	for _, c := range []struct {
		k    kind
		path string
	}{{kindTurn, "/api/sessions/agent/turns/" + s.turnID + "/cancel"}, {kindJob, "/api/jobs/" + s.jobID + "/cancel"}} {
		if s.look(c.k, time.Now()).ended {
			continue
		}
		if status, _, raw, err := s.call("POST", c.path, nil); err != nil || status/100 != 2 {
			t.Errorf("%s: cancel = %d %s %v", c.k, status, raw, err)
			continue
		}
		start := time.Now()
		if !poll(endBound, func() bool { return s.look(c.k, start).ended }) {
			t.Errorf("%s: not ended %s after its cancel: %s", c.k, endBound, s.look(c.k, start).saw)
		} else if got := s.look(c.k, start); !strings.HasPrefix(got.saw, "cancelled") && !strings.HasPrefix(got.saw, "failed") {
			t.Errorf("%s: after its cancel, %s", c.k, got.saw)
		}
	}
	var left []string
	if !poll(endBound, func() bool { left = s.agentProcesses(); return len(left) == 0 }) {
		t.Errorf("%d of the agents' processes still run %s after their turns ended:\n%s", len(left), endBound, strings.Join(left, "\n"))
	}
	// A sandbox the fault destroyed already is 409 "already destroyed".
	if status, _, raw, err := s.call("DELETE", "/api/sandboxes/"+s.name, nil); err != nil || (status/100 != 2 && status != 404 && !(status == 409 && s.fault == "sandbox-destroyed")) {
		t.Errorf("destroy the sandbox: %d %s %v", status, raw, err)
	}
}

// checkEvents reads every event the session and the job recorded: their numbers go 1, 2, 3,
// ... (none twice, none missing), each turn's ticks too, and every tick the event stream had
// delivered before the fault (before) is among them.
func (s *scenario) checkEvents(before int) {
	t := s.t
	t.Helper()
	for _, c := range []struct {
		what, path, seqKey string
		ticksBefore        int
	}{{"session", "/api/sessions/agent/events", "seq", before}, {"job", "/api/jobs/" + s.jobID + "/events", "job_seq", 0}} {
		var problems []string
		next, ticks, seen := 0, 0, map[int]int{}
		for page := 0; page < 100; page++ {
			status, _, raw, err := s.call("GET", fmt.Sprintf("%s?since=%d&limit=1000", c.path, next), nil)
			if err != nil || status != 200 {
				t.Errorf("%s's events: %d %s %v", c.what, status, raw, err)
				return
			}
			var out struct {
				Events []map[string]any `json:"events"`
				Next   int              `json:"next"`
			}
			json.Unmarshal(raw, &out)
			if len(out.Events) == 0 {
				break
			}
			for _, ev := range out.Events {
				seq := int(ev[c.seqKey].(float64))
				if seq != next+1 {
					problems = append(problems, fmt.Sprintf("%s %d after %d", c.seqKey, seq, next))
				}
				next = seq
				if ev["type"] == "tick" {
					n := int(ev["data"].(map[string]any)["n"].(float64))
					seen[n]++
					if seen[n] > 1 {
						problems = append(problems, fmt.Sprintf("tick %d recorded twice", n))
					} else if n != ticks+1 {
						problems = append(problems, fmt.Sprintf("tick %d after tick %d", n, ticks))
					}
					ticks = max(ticks, n)
				}
			}
		}
		if ticks < c.ticksBefore {
			problems = append(problems, fmt.Sprintf("%d ticks recorded, but the stream had delivered %d before the fault", ticks, c.ticksBefore))
		}
		if len(problems) > 0 {
			t.Errorf("%s's events: %s", c.what, strings.Join(problems, "; "))
		} else {
			t.Logf("%s's events: %d, each once, in order; ticks 1 to %d, each once", c.what, next, ticks)
		}
	}
}
