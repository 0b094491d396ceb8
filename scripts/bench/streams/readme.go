package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The README's table lives between these markers; the rest of the README is left as it is.
const (
	beginMarker = "<!-- streams:begin (written by scripts/bench/streams) -->"
	endMarker   = "<!-- streams:end -->"
)

// seed is the spec's figures (spec/streaming.md, "Numbers": Docker, 2-vCPU VM), per mode.
var seed = map[string]string{
	"mcp_exec_stream":    "112 / 117 ms · 0.8 / 2.0 ms",
	"mcp_process_attach": "111 / 116 ms · 0.9 / 2.3 ms",
	"rest_exec_result":   "3,124 / 3,132 ms · 1,553 / 2,909 ms",
	"mcp_terminal_poll":  "1,058 / 1,063 ms · 503 / 981 ms",
}

var modeLabels = map[string]string{
	"mcp_exec_stream":      "exec(stream=true), MCP progress",
	"rest_exec_stream":     "REST exec/stream, SSE",
	"mcp_exec_stream_http": "diagnostic: exec(stream=true) read by a bare HTTP client, not go-sdk's",
	"mcp_process_attach":   "process start + attach, MCP",
	"rest_exec_result":     "exec, the result at the end",
	"mcp_terminal_poll":    "terminal_open + terminal_read every second",
	"raw_daemon":           "the daemon's own stream, read directly",
	"e2b_passthrough":      "E2B's SDK's Start (Connect, JSON) through hangar's /e2b/sandbox",
	"relay_floor":          "the floor of any relay: the daemon's stream through a one-goroutine TCP relay process",
	"relay_floor_again":    "the same relay floor, measured first in each round: how far two runs of one thing differ",
	"docker_exec":          "docker exec (CLI)",
}

func table(reports []report) string {
	var b strings.Builder
	for _, r := range reports {
		fmt.Fprintf(&b, "\n### %s provider (%s, %d cores%s, %s, hangar %s)\n\n", r.Provider, r.Date, r.Machine.Cores, loadText(r.Load), r.Machine.GoVersion, r.Machine.HangarCommit)
		b.WriteString("| How the client sees output | First line p50 / p95 | Overhead over the print p50 / p95 | Each line's delay p50 / p95 | Seed (spec, Docker): first line · per line |\n|---|---|---|---|---|\n")
		for _, m := range modes {
			st, ok := r.Modes[m.name]
			if !ok {
				continue
			}
			row := fmt.Sprintf("%.1f / %.1f ms | %.2f / %.2f ms | %.2f / %.2f ms", st.FirstLineP50Ms, st.FirstLineP95Ms,
				st.FirstOverheadP50Ms, st.FirstOverheadP95Ms, st.DelayP50Ms, st.DelayP95Ms)
			if st.Runs == 0 {
				row = "— | — | —"
			}
			if st.Note != "" {
				row += " (" + st.Note + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", modeLabels[m.name], row, orDash(seed[m.name]))
		}
		b.WriteString(ratioText(r))
		if len(r.Scale) > 0 {
			b.WriteString("\n| Concurrent streamed execs (10 lines/s each) | Per-line delay p50 / p95 / p99 | The same load from the daemon directly (no hangar) | hangar RSS | Goroutines | Lines missing |\n|---|---|---|---|---|---|\n")
			floor := map[int]string{}
			for _, s := range r.Scale {
				if s.Via == "daemon" {
					floor[s.Streams] = fmt.Sprintf("%.2f / %.2f / %.2f ms", s.DelayP50Ms, s.DelayP95Ms, s.DelayP99Ms)
				}
			}
			for _, s := range r.Scale {
				if s.Via != "" {
					continue
				}
				fmt.Fprintf(&b, "| %d | %.2f / %.2f / %.2f ms | %s | %.1f MiB | %d | %d |\n", s.Streams, s.DelayP50Ms, s.DelayP95Ms, s.DelayP99Ms,
					orDash(floor[s.Streams]), float64(s.MaxRSSBytes)/(1<<20), s.MaxGoroutines, s.Missing)
			}
		}
		if r.Pacing != nil {
			fmt.Fprintf(&b, "\nPacing at the default 1 MiB/s: measured %.0f bytes/s (%+.1f %%; target ±5 %%).", r.Pacing.BytesPerSecond, r.Pacing.ErrorPercent)
		}
		if r.Unpaced != nil {
			fmt.Fprintf(&b, " One unpaced SSE stream: %.1f MiB/s over %d MiB.", r.Unpaced.BytesPerSecond/(1<<20), r.Unpaced.Bytes>>20)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ratioText is issue 31's measure, each line's delay through hangar over the relay floor's (p50
// and p95; targets on p50: REST ≤ +0.05 ms, MCP read by a bare HTTP client ≤ +0.10 ms), with
// the interval its runs give the p50's and the floor's gap over itself (the measure's noise),
// then issue 11's retired one, against the raw daemon's, for comparison with earlier runs. ""
// without the relay floor's row.
func ratioText(r report) string {
	floor, ok := r.Modes["relay_floor"]
	if !ok || floor.Runs == 0 {
		return ""
	}
	var over []string
	for _, m := range []struct {
		name, label string
		target      float64
	}{{"rest_exec_stream", "REST", 0.05}, {"mcp_exec_stream_http", "MCP read by a bare HTTP client", 0.10}, {"mcp_exec_stream", "MCP (go-sdk's client)", 0},
		{"relay_floor_again", "the floor itself, measured again", 0}} {
		st, ok := r.Modes[m.name]
		if !ok || st.Runs == 0 {
			continue
		}
		part := fmt.Sprintf("%s %+.2f / %+.2f ms", m.label, st.DelayP50Ms-floor.DelayP50Ms, st.DelayP95Ms-floor.DelayP95Ms)
		var notes []string
		g, spread := r.Gaps[m.name]
		spread = spread && g.Pairs > 1
		if spread {
			notes = append(notes, fmt.Sprintf("p50 %+.2f to %+.2f over its runs", g.LowMs, g.HighMs))
		}
		if m.target > 0 {
			verdict := "met"
			if st.DelayP50Ms-floor.DelayP50Ms > m.target {
				verdict = "not met"
			}
			if spread && g.LowMs <= m.target && m.target < g.HighMs {
				verdict += ", within what its runs spread over"
			}
			notes = append(notes, fmt.Sprintf("target p50 ≤ +%.2f ms: %s", m.target, verdict))
		}
		if len(notes) > 0 {
			part += " (" + strings.Join(notes, "; ") + ")"
		}
		over = append(over, part)
	}
	text := "\nEach line's delay over the relay floor's, p50 / p95 (issue 31): " + strings.Join(over, "; ") + "."
	raw, ok := r.Modes["raw_daemon"]
	if ok && raw.Runs > 0 && raw.DelayP50Ms > 0 && raw.DelayP95Ms > 0 {
		var parts []string
		for _, m := range []struct{ name, label string }{{"rest_exec_stream", "REST"}, {"mcp_exec_stream", "MCP (go-sdk's client)"}, {"relay_floor", "the relay floor"}} {
			if st, ok := r.Modes[m.name]; ok && st.Runs > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f× / %.2f×", m.label, st.DelayP50Ms/raw.DelayP50Ms, st.DelayP95Ms/raw.DelayP95Ms))
			}
		}
		text += " Against the raw daemon's (issue 11's ratios, retired): " + strings.Join(parts, "; ") + "."
	}
	return text + "\n"
}

// loadText is the 1-minute load average before and after the run, e.g. ", load 0.52 → 1.87".
func loadText(l load) string {
	if len(l.Before) == 0 || len(l.After) == 0 {
		return ""
	}
	return fmt.Sprintf(", load %.2f → %.2f", l.Before[0], l.After[0])
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// writeReadme puts the table between the markers of path, creating the file if needed.
func writeReadme(path string, reports []report) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	body := string(old)
	i, j := strings.Index(body, beginMarker), strings.Index(body, endMarker)
	if i < 0 || j < i {
		body = "# Benchmarks\n\n" + beginMarker + "\n" + endMarker + "\n"
		i, j = strings.Index(body, beginMarker), strings.Index(body, endMarker)
	}
	body = body[:i+len(beginMarker)] + "\n" + table(reports) + "\n" + body[j:]
	return os.WriteFile(path, []byte(body), 0o644)
}

// latestReports reads the newest results file of each provider in dir, so a run of one
// provider leaves the others' tables as they were.
func latestReports(dir string) ([]report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*-streams-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files) // dated names: the newest last
	newest := map[string]report{}
	var order []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if _, seen := newest[r.Provider]; !seen {
			order = append(order, r.Provider)
		}
		newest[r.Provider] = r
	}
	sort.Strings(order)
	out := make([]report, 0, len(order))
	for _, p := range order {
		out = append(out, newest[p])
	}
	return out, nil
}
