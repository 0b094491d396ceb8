package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Phases of a run, in order: the load's warm-up, the replicas rolled one by one, one killed
// with SIGKILL and restarted, the load drained.
const (
	phaseWarmup = "warmup"
	phaseRoll   = "roll"
	phaseKill   = "kill"
	phaseDrain  = "drain"
)

var phaseNames = []string{phaseWarmup, phaseRoll, phaseKill, phaseDrain}

// phases is the current phase, read by every request as it starts.
type phases struct {
	mu  sync.Mutex // guards cur
	cur string
}

func (p *phases) set(name string) { p.mu.Lock(); p.cur = name; p.mu.Unlock() }
func (p *phases) get() string     { p.mu.Lock(); defer p.mu.Unlock(); return p.cur }

// tally counts answers by phase, then by status ("200", "503", or "error" when no answer came),
// then by kind of request; and broken streams (an SSE answer that ended without its last event)
// by phase and kind.
type tally struct {
	mu     sync.Mutex // guards the maps
	status map[string]map[string]map[string]int
	broken map[string]map[string]int
	// firstBad keeps, per phase, the first few answers of each status of 500 or more (kind,
	// path, body): what a failure report shows.
	firstBad map[string][]string
	badSeen  map[string]int // per phase and status
}

func newTally() *tally {
	return &tally{status: map[string]map[string]map[string]int{}, broken: map[string]map[string]int{}, firstBad: map[string][]string{}, badSeen: map[string]int{}}
}

func (t *tally) add(phase, status, kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status[phase] == nil {
		t.status[phase] = map[string]map[string]int{}
	}
	if t.status[phase][status] == nil {
		t.status[phase][status] = map[string]int{}
	}
	t.status[phase][status][kind]++
}

func (t *tally) bad(phase string, status int, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := fmt.Sprint(phase, status)
	if t.badSeen[key] < 3 {
		t.badSeen[key]++
		t.firstBad[phase] = append(t.firstBad[phase], what)
	}
}

func (t *tally) brokenStream(phase, kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken[phase] == nil {
		t.broken[phase] = map[string]int{}
	}
	t.broken[phase][kind]++
}

func is5xx(st string) bool { c, err := strconv.Atoi(st); return err == nil && c >= 500 }

// client makes requests as the load does, through the proxy (or straight to a replica, for
// the probes), counting each answer in its tally under the phase it came in.
type client struct {
	base  string
	token string
	hc    *http.Client
	ph    *phases
	tl    *tally
}

// do sends one request; a non-2xx answer's body is read and closed, and returned as an error
// with the status.
func (c *client) do(ctx context.Context, kind, method, path, body string, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.hc.Do(req)
	// The phase of the answer, not of the request: one sent in the rolling restart and broken
	// by the crash that followed is the crash's.
	phase := c.ph.get()
	if err != nil {
		if ctx.Err() == nil {
			c.tl.add(phase, "error", kind)
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	st := strconv.Itoa(resp.StatusCode)
	c.tl.add(phase, st, kind)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			c.tl.bad(phase, resp.StatusCode, fmt.Sprintf("%s %s %s = %d %s", kind, method, path, resp.StatusCode, strings.Join(strings.Fields(string(b)), " ")))
		}
		return nil, &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s = %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	return resp, nil
}

// json sends one request and decodes a 2xx answer into out (when not nil).
func (c *client) json(ctx context.Context, kind, method, path, body string, out any) error {
	resp, err := c.do(ctx, kind, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode %.200s: %w", method, path, b, err)
		}
	}
	return nil
}

// statusError is a non-2xx answer.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// pause waits d or until ctx ends: the load's pacing between attempts (it is no assertion).
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// statusTable is the tally as a JSON-friendly map: phase → status → count, and the 5xx count
// per phase.
func (t *tally) statusTable() (map[string]map[string]int, map[string]int, map[string]map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]int{}
	fivexx := map[string]int{}
	for _, ph := range phaseNames {
		out[ph] = map[string]int{}
		fivexx[ph] = 0
		for st, kinds := range t.status[ph] {
			for kind, n := range kinds {
				out[ph][st] += n
				if is5xx(st) {
					fivexx[ph] += n
					out[ph][st+" "+kind] += n
				}
			}
		}
	}
	broken := map[string]map[string]int{}
	for ph, kinds := range t.broken {
		broken[ph] = map[string]int{}
		for k, n := range kinds {
			broken[ph][k] = n
		}
	}
	return out, fivexx, broken
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
