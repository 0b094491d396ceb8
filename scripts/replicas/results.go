package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// results is what a run writes to bench/results/<date>-replicas.json.
type results struct {
	Date        string                    `json:"date"`
	Machine     benchkit.Machine          `json:"machine"`
	Method      string                    `json:"method"`
	LoadBefore  float64                   `json:"load_avg_1m_before"`
	LoadAfter   float64                   `json:"load_avg_1m_after"`
	Handovers   []handover                `json:"rolls"`
	Crash       takeover                  `json:"crash"`
	Figures     figures                   `json:"figures"`
	Status      map[string]map[string]int `json:"answers_by_phase"`
	Broken      map[string]map[string]int `json:"broken_streams_by_phase"`
	Turns       turnFigures               `json:"turns"`
	Processes   procFigures               `json:"processes"`
	Execs       execStats                 `json:"execs"`
	Watch       streamStats               `json:"watches"`
	Fleet       streamStats               `json:"fleet_streams"`
	MCP         mcpStats                  `json:"mcp_sessions"`
	LeasesAtEnd map[string]int            `json:"leases_at_end"`
	Failures    []string                  `json:"failures"`

	DurationSeconds float64 `json:"duration_seconds"`
}

// figures are the headline: docs/replicas.md's table.
type figures struct {
	HandoverP50    float64        `json:"handover_p50_seconds"`
	HandoverMax    float64        `json:"handover_max_seconds"` // -1: a lease was not handed over
	ExitMax        float64        `json:"exit_after_sigterm_max_seconds"`
	TakeoverP50    float64        `json:"takeover_p50_seconds"`
	TakeoverMax    float64        `json:"takeover_max_seconds"` // -1: a sandbox was not taken over
	FiveXX         map[string]int `json:"5xx_by_phase"`
	LinesLost      int            `json:"turn_lines_lost"`
	LinesDup       int            `json:"turn_lines_duplicated"`
	DeliveredLost  int            `json:"events_not_delivered"`
	DeliveredDup   int            `json:"events_delivered_twice"`
	OutputUnmarked int            `json:"output_problems_without_gap"`
}

type turnFigures struct {
	Started       int            `json:"started"`
	Statuses      map[string]int `json:"statuses"`
	Stalled       int            `json:"stalled"`
	NeverStarted  int            `json:"failed_before_starting"`
	FailedInCrash int            `json:"failed_before_starting_in_the_crash"`
	LinesRecorded int            `json:"lines_recorded"`
	Reconnects    int            `json:"reader_reconnects"`
}

type procFigures struct {
	Processes int `json:"processes"`
	Ended     int `json:"ended"`
	Attaches  int `json:"attaches"`
	Gaps      int `json:"gaps"`
	LostLines int `json:"lines_lost_in_gaps"`
}

// readFixture is the run log's lines, each in canonical JSON.
func readFixture(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the fixture run log (../shared/fixtures beside the repository): %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, canonical(sc.Bytes()))
		}
	}
	return out, sc.Err()
}

// recorded reads every event of a session through the proxy.
func recorded(ctx context.Context, c *client, session string) ([]sessionEvent, error) {
	var all []sessionEvent
	since := int64(0)
	for {
		var page struct {
			Events []sessionEvent `json:"events"`
			Next   int64          `json:"next"`
		}
		if err := c.json(ctx, "verify", "GET", fmt.Sprintf("/api/sessions/%s/events?since=%d&limit=1000", session, since), "", &page); err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 || page.Next <= since {
			return all, nil
		}
		since = page.Next
	}
}

// turnRecord is what a session's events say of one turn: whether hangar's turn.started is
// there, the agent's lines (canonical), and its turn.finished's status and reason.
type turnRecord struct {
	started        bool
	lines          []string
	status, reason string
}

// turnRecords reads a session's events turn by turn.
func turnRecords(evs []sessionEvent) map[string]*turnRecord {
	out := map[string]*turnRecord{}
	for _, e := range evs {
		tr := out[e.Turn]
		if tr == nil {
			tr = &turnRecord{}
			out[e.Turn] = tr
		}
		switch e.Type {
		case "turn.started":
			tr.started = true
		case "turn.finished":
			var f struct{ Status, Reason string }
			json.Unmarshal(e.Data, &f)
			tr.status, tr.reason = f.Status, f.Reason
		default:
			tr.lines = append(tr.lines, canonical(e.Data))
		}
	}
	return out
}

// check computes the figures and returns every failed assertion.
func check(ctx context.Context, l *load, fixture []string, res *results) []string {
	var fail []string
	failf := func(format string, args ...any) { fail = append(fail, fmt.Sprintf(format, args...)) }
	l.mu.Lock()
	defer l.mu.Unlock()

	// Turns: recorded once each, delivered once each, in order.
	res.Turns.Statuses = map[string]int{}
	for _, s := range l.turns {
		evs, err := recorded(ctx, l.c, s.Name)
		if err != nil {
			failf("read the events of session %s: %v", s.Name, err)
			continue
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				failf("session %s: recorded event %d has seq %d (seqs must be gapless from 1)", s.Name, i, e.Seq)
				break
			}
		}
		rec, got := turnRecords(evs), turnRecords(s.delivered)
		res.Turns.Reconnects += s.Reconnect
		for _, id := range s.Turns {
			res.Turns.Started++
			r, d := rec[id], got[id]
			if r == nil {
				r = &turnRecord{}
			}
			if d == nil {
				d = &turnRecord{}
			}
			st := r.status
			if st == "" {
				st = "unfinished"
			}
			res.Turns.Statuses[st]++
			if !r.started && st == "failed" && s.endPhase[id] == phaseKill && r.reason == turns.ReasonLaunchCut {
				// A turn whose harness the killed replica was launching: the replica that takes
				// the sandbox over fails it (that harness may run), as docs/replicas.md says.
				// Counted, not a failure. A queued turn whose launch had not begun runs.
				res.Turns.FailedInCrash++
				continue
			}
			if st != "done" {
				failf("session %s: turn %s ended %s in the %s phase, want done (%s)", s.Name, id, st, s.endPhase[id], r.reason)
			}
			if !r.started { // it never ran: no line of it can be lost
				res.Turns.NeverStarted++
				continue
			}
			res.Turns.LinesRecorded += len(r.lines)
			lost, dup, ordered := turnLines(fixture, r.lines)
			res.Figures.LinesLost += lost
			res.Figures.LinesDup += dup
			if lost > 0 || dup > 0 || !ordered {
				failf("session %s: turn %s recorded %d of the fixture's %d lines: %d missing, %d repeated, in order: %v", s.Name, id, len(r.lines), len(fixture), lost, dup, ordered)
			}
			dlost, ddup, dordered := turnLines(r.lines, d.lines)
			res.Figures.DeliveredLost += dlost
			res.Figures.DeliveredDup += ddup
			if dlost > 0 || ddup > 0 || !dordered {
				failf("session %s: turn %s: the live reader got %d of the %d lines recorded: %d missing, %d repeated, in order: %v", s.Name, id, len(d.lines), len(r.lines), dlost, ddup, dordered)
			}
		}
		for _, id := range s.Stalled {
			failf("session %s: turn %s had not finished %s after it was started (nobody watched it)", s.Name, id, turnTimeout)
		}
		res.Turns.Stalled += len(s.Stalled)
		for _, p := range s.Problems {
			failf("session %s's reader: %s", s.Name, p)
		}
		if len(s.delivered) != len(evs) {
			failf("session %s: the reader got %d events, %d are recorded", s.Name, len(s.delivered), len(evs))
		}
	}

	// Background processes: whole, or with an explicit gap; each ended and seen to end.
	for _, p := range l.procs {
		res.Processes.Processes++
		res.Processes.Attaches += p.Attaches
		res.Processes.Gaps += p.check.gaps
		res.Processes.LostLines += p.check.lost
		p.Lines, p.Gaps, p.LostLines, p.Ended, p.Problems = p.check.last, p.check.gaps, p.check.lost, p.check.ended, p.check.problems
		if p.check.ended {
			res.Processes.Ended++
		} else {
			failf("process %s in %s: its attacher never got its end", p.ID, p.Sandbox)
		}
		res.Figures.OutputUnmarked += len(p.check.problems)
		for _, pr := range p.check.problems {
			failf("process %s in %s: %s", p.ID, p.Sandbox, pr)
		}
	}
	res.Execs = l.execs
	for _, pr := range l.execs.Problems {
		failf("%s", pr)
	}
	res.Watch, res.Fleet, res.MCP = l.watch, l.fleet, l.mcp
	if l.mcp.NotFound > 0 || l.mcp.BadAnswers > 0 {
		failf("2025-era MCP sessions through the proxy: %d requests answered 404 though the replica holding the session runs, %d calls answered wrong (of %d): %s",
			l.mcp.NotFound, l.mcp.BadAnswers, l.mcp.Calls+l.mcp.NotFound+l.mcp.GoneHolder, strings.Join(l.mcp.Problems, "; "))
	}
	for _, n := range l.probes {
		failf("%s", n)
	}

	// Answers: no 5xx but in the crash.
	var fivexx map[string]int
	res.Status, fivexx, res.Broken = l.c.tl.statusTable()
	res.Figures.FiveXX = fivexx
	for _, ph := range phaseNames {
		if ph != phaseKill && fivexx[ph] > 0 {
			failf("%d answers of 500 or more during the %s phase, want 0: %s", fivexx[ph], ph, strings.Join(l.c.tl.firstBad[ph], "; "))
		}
	}

	// A replica that shuts down ends its streams with their last event (close, result): a
	// stream that breaks during the rolling restart was cut instead.
	if n := sum(res.Broken[phaseRoll]); n > 0 {
		failf("%d streams broke during the rolling restart without their last event (close, end or result), want 0: %v", n, res.Broken[phaseRoll])
	}

	// Hand-over at SIGTERM within handoverBound, take-over after SIGKILL within takeoverBound.
	var hs []float64
	for _, h := range res.Handovers {
		for _, sb := range h.Sandboxes {
			s := h.Seconds[sb]
			hs = append(hs, s)
			if s < 0 || s > handoverBound.Seconds() {
				failf("SIGTERM to replica %s: sandbox %s had no live owner %s later (%s)", h.Replica, sb, handoverBound, secondsText(s, handoverWait.String()+" after the exit"))
			}
		}
	}
	res.Figures.HandoverP50, res.Figures.HandoverMax = percentiles(hs)
	for _, h := range res.Handovers {
		res.Figures.ExitMax = max(res.Figures.ExitMax, math.Round(h.ExitSeconds*1000)/1000)
	}
	var ks []float64
	for _, sb := range res.Crash.Sandboxes {
		s := res.Crash.Seconds[sb]
		ks = append(ks, s)
		if s < 0 || s > takeoverBound.Seconds() {
			failf("SIGKILL of replica %s: sandbox %s not answered for by a peer within %s (%s)", res.Crash.Replica, sb, takeoverBound, secondsText(s, takeoverWait.String()))
		}
	}
	if len(res.Crash.Sandboxes) == 0 {
		failf("the killed replica %s held no lease: the crash measured nothing", res.Crash.Replica)
	}
	res.Figures.TakeoverP50, res.Figures.TakeoverMax = percentiles(ks)
	res.Failures = fail
	res.Method = "3 hangar serve (local provider, one HANGAR_DATA_DIR, one HANGAR_SECRET, default lease) on one PostgreSQL schema behind a random-routing loopback proxy; " +
		"load: streamed execs, background processes attached and reattached with Last-Event-ID, turns replaying a fixture run log with a resuming reader of each session's events, watches, fleet streams, light reads; " +
		"each replica rolled (out of the proxy, SIGTERM, exit, start, back in), then the one holding most leases killed with SIGKILL and restarted; " +
		"handover: SIGTERM until a live peer holds the lease (the database's leases); takeover: SIGKILL until a peer answers GET .../processes with 200"
	return fail
}

func secondsText(s float64, never string) string {
	if s < 0 {
		return "none within " + never
	}
	return fmt.Sprintf("%.2f s", s)
}

// printSummary prints the figures and every failure.
func printSummary(res *results, failures []string) {
	f := res.Figures
	fmt.Println("--- replicas chaos test")
	fmt.Printf("duration %.0f s; load avg %.2f -> %.2f on %d cores\n", res.DurationSeconds, res.LoadBefore, res.LoadAfter, res.Machine.Cores)
	fmt.Printf("handover after SIGTERM: p50 %s, max %s\n", secondsText(f.HandoverP50, "-"), secondsText(f.HandoverMax, "bound"))
	fmt.Printf("takeover after SIGKILL: p50 %s, max %s; probe answers %v\n", secondsText(f.TakeoverP50, "-"), secondsText(f.TakeoverMax, "bound"), res.Crash.ProbeAnswers)
	for _, ph := range phaseNames {
		fmt.Printf("%-7s answers %v; broken streams %v\n", ph, res.Status[ph], res.Broken[ph])
	}
	fmt.Printf("turns: %d started %v (failed before they ran: %d, %d of them in the crash), %d stalled, %d lines recorded; lost %d, duplicated %d; not delivered %d, delivered twice %d\n",
		res.Turns.Started, res.Turns.Statuses, res.Turns.NeverStarted+res.Turns.FailedInCrash, res.Turns.FailedInCrash, res.Turns.Stalled, res.Turns.LinesRecorded, f.LinesLost, f.LinesDup, f.DeliveredLost, f.DeliveredDup)
	fmt.Printf("processes: %d (%d ended), %d attaches, %d gaps (%d lines lost in them), %d problems without a gap\n",
		res.Processes.Processes, res.Processes.Ended, res.Processes.Attaches, res.Processes.Gaps, res.Processes.LostLines, f.OutputUnmarked)
	fmt.Printf("execs: %d started, %d complete, %d ended by shutdown, %d broken, %d refused, %d other\n",
		res.Execs.Started, res.Execs.Complete, res.Execs.Shutdown, res.Execs.Broken, res.Execs.Refused, res.Execs.Other)
	fmt.Printf("watches: %+v; fleet streams: %+v; leases at the end: %v\n", res.Watch, res.Fleet, res.LeasesAtEnd)
	fmt.Printf("MCP sessions: %d opened, %d calls; 404: %d with the holder gone, %d with it live\n", res.MCP.Sessions, res.MCP.Calls, res.MCP.GoneHolder, res.MCP.NotFound)
	if len(failures) == 0 {
		fmt.Println("PASS")
		return
	}
	fmt.Printf("FAIL: %d checks failed\n", len(failures))
	for _, x := range failures {
		fmt.Println("  -", x)
	}
}

// The markers of the figures' table in docs/replicas.md.
const (
	figuresBegin = "<!-- chaos-figures:begin (written by go run ./scripts/replicas -docs docs/replicas.md) -->"
	figuresEnd   = "<!-- chaos-figures:end -->"
)

// figuresTable is the headline figures as docs/replicas.md shows them.
func figuresTable(res *results) string {
	f := res.Figures
	pair := func(a, b float64, never string) string {
		return secondsText(a, never) + " / " + secondsText(b, never)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s (hangar %s, %d cores, load %.1f → %.1f, %.0f s):\n\n", res.Date, res.Machine.HangarCommit, res.Machine.Cores, res.LoadBefore, res.LoadAfter, res.DurationSeconds)
	b.WriteString("| Figure | Measured | Target |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| Hand-over after SIGTERM (a live peer holds the lease), p50 / max | %s | ≤ 10 s (requests wait for it) |\n", pair(f.HandoverP50, f.HandoverMax, handoverWait.String()+" after the exit"))
	fmt.Fprintf(&b, "| From SIGTERM to the replica's exit, max | %.2f s | within the grace (30 s) |\n", f.ExitMax)
	fmt.Fprintf(&b, "| Take-over after SIGKILL (a peer answers for the sandbox), p50 / max | %s | ≤ 3 s |\n", pair(f.TakeoverP50, f.TakeoverMax, takeoverWait.String()))
	fmt.Fprintf(&b, "| 5xx answers: warm-up / rolling restart / crash / drain | %d / %d / %d / %d | 0 / 0 / reported / 0 |\n", f.FiveXX[phaseWarmup], f.FiveXX[phaseRoll], f.FiveXX[phaseKill], f.FiveXX[phaseDrain])
	fmt.Fprintf(&b, "| Streams broken without their last event: rolling restart / crash | %d / %d | 0 / reported |\n", sum(res.Broken[phaseRoll]), sum(res.Broken[phaseKill]))
	fmt.Fprintf(&b, "| Turns: started / done / failed before they ran (in the crash) / stalled | %d / %d / %d (%d) / %d | all done but in the crash |\n", res.Turns.Started, res.Turns.Statuses["done"], res.Turns.NeverStarted+res.Turns.FailedInCrash, res.Turns.FailedInCrash, res.Turns.Stalled)
	fmt.Fprintf(&b, "| Turn lines lost / recorded twice (of %d recorded) | %d / %d | 0 / 0 |\n", res.Turns.LinesRecorded, f.LinesLost, f.LinesDup)
	fmt.Fprintf(&b, "| Events not delivered / delivered twice to the resuming readers | %d / %d | 0 / 0 |\n", f.DeliveredLost, f.DeliveredDup)
	fmt.Fprintf(&b, "| Process output repeated or skipped without a gap (gaps: %d) | %d | 0 |\n", res.Processes.Gaps, f.OutputUnmarked)
	fmt.Fprintf(&b, "| Streamed execs: complete / ended `shutdown` / broken | %d / %d / %d | |\n", res.Execs.Complete, res.Execs.Shutdown, res.Execs.Broken)
	fmt.Fprintf(&b, "| MCP session requests answered 404 with the holder live / gone (of %d calls) | %d / %d | 0 / any |\n", res.MCP.Calls, res.MCP.NotFound, res.MCP.GoneHolder)
	fmt.Fprintf(&b, "| Leases per replica at the end | %s | spread |\n", leasesText(res.LeasesAtEnd))
	return b.String()
}

func leasesText(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
