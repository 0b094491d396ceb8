package main

import (
	"strings"
	"testing"
	"time"
)

// runOf is a run whose lines took these delays, in ms.
func runOf(delays ...float64) run {
	var r run
	t0 := time.Unix(1000, 0)
	for i, d := range delays {
		r.lines = append(r.lines, line{i: i + 1, printed: t0, at: t0.Add(time.Duration(d * float64(time.Millisecond)))})
	}
	return r
}

func TestGapOver(t *testing.T) {
	floor := []run{runOf(0.5, 0.6, 0.7), runOf(0.5, 0.6, 0.7), runOf(0.5, 0.6, 0.7)}
	// Every pair alike: the interval is the figure itself.
	same := []run{runOf(0.55, 0.65, 0.75), runOf(0.55, 0.65, 0.75), runOf(0.55, 0.65, 0.75)}
	g, ok := gapOver(same, floor)
	if !ok || g.P50Ms != 0.05 || g.LowMs != 0.05 || g.HighMs != 0.05 || g.Pairs != 3 {
		t.Errorf("alike pairs: %+v, want +0.05 from +0.05 to +0.05 over 3", g)
	}
	// Pairs that disagree: the pooled p50 is the figure, and the interval spans the runs'.
	spread := []run{runOf(0.5, 0.6, 0.7), runOf(0.6, 0.7, 0.8), runOf(0.9, 1.0, 1.1)}
	g, _ = gapOver(spread, floor)
	if g.P50Ms != 0.1 {
		t.Errorf("p50 gap = %v, want 0.1 (pooled 0.7 less 0.6)", g.P50Ms)
	}
	if g.LowMs > 0 || g.HighMs < 0.3 || g.LowMs > g.P50Ms || g.HighMs < g.P50Ms {
		t.Errorf("interval %v to %v, want it from 0 (the first pair alone) to at least 0.3 around %v", g.LowMs, g.HighMs, g.P50Ms)
	}
	// A mode that stopped after its first run is paired by that run only.
	g, ok = gapOver(spread[:1], floor)
	if !ok || g.Pairs != 1 || g.P50Ms != 0 {
		t.Errorf("one run: %+v", g)
	}
	if _, ok := gapOver(nil, floor); ok {
		t.Error("a mode with no runs has a gap")
	}
}

// The verdict on a target says when the runs spread across it: a point under the target is not
// the target met where the runs could as well have put it over.
func TestRatioTextVerdicts(t *testing.T) {
	r := report{Modes: map[string]stats{
		"relay_floor":          {Runs: 4, DelayP50Ms: 1.00, DelayP95Ms: 2},
		"rest_exec_stream":     {Runs: 4, DelayP50Ms: 1.03, DelayP95Ms: 2},
		"mcp_exec_stream_http": {Runs: 4, DelayP50Ms: 1.20, DelayP95Ms: 2},
	}, Gaps: map[string]gap{
		"rest_exec_stream":     {P50Ms: 0.03, LowMs: -0.2, HighMs: 0.3, Pairs: 4},
		"mcp_exec_stream_http": {P50Ms: 0.20, LowMs: 0.15, HighMs: 0.25, Pairs: 4},
	}}
	text := ratioText(r)
	for _, want := range []string{
		"REST +0.03 / +0.00 ms (p50 -0.20 to +0.30 over its runs; target p50 ≤ +0.05 ms: met, within what its runs spread over)",
		"MCP read by a bare HTTP client +0.20 / +0.00 ms (p50 +0.15 to +0.25 over its runs; target p50 ≤ +0.10 ms: not met)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("ratio text lacks %q:\n%s", want, text)
		}
	}
}
