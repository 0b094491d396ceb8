package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// The README's turns section lives between these markers; the rest of the README (the other
// benches' sections) is left as it is.
const (
	beginMarker = "<!-- turns:begin (written by scripts/bench/turns) -->"
	endMarker   = "<!-- turns:end -->"
)

var modeLabels = map[string]string{
	"sse_following": "run log followed, SSE reader",
	"sse_polling":   "run log polled every 5 s (HANGAR_STREAM_TURN_LOGS=false), SSE reader",
	"mcp_following": "run log followed, MCP subscriber",
}

var seed = map[string]string{
	"sse_following": "15 / 22 ms",
	"sse_polling":   "4,727 / 4,936 ms",
}

// modeOrder lists the modes in the table's order.
var modeOrder = []string{"sse_following", "mcp_following", "sse_polling"}

func section(reports []report) string {
	var b strings.Builder
	b.WriteString("\n## Turn events\n\n")
	b.WriteString("From a run-log line printed by the agent (the `command` agent replaying a real fixture log a line\n")
	b.WriteString("every 100 ms, each line stamped as it is printed) to its event at a client of the session's events\n")
	b.WriteString("(`scripts/bench/turns`). *Recorded* is from the print to the event's `ts` (when hangar stored it;\n")
	b.WriteString("millisecond resolution). Target: following ≤ 5 ms p50 and ≤ 10 ms p95 in a Docker container.\n")
	b.WriteString("The MCP subscriber is told at once of the first change, then at most every 250 ms (the spec's\n")
	b.WriteString("coalescing), and reads what is new: at 10 lines a second its delay is mostly that wait.\n")
	for _, r := range reports {
		fmt.Fprintf(&b, "\n### %s provider (%s, %d cores, %s, hangar %s, fixture %s)\n\n", r.Provider, r.Date, r.Machine.Cores, r.Machine.GoVersion, r.Machine.HangarCommit, r.Fixture)
		b.WriteString("| Mode | Delay p50 / p95 / p99 (max) | Recorded p50 / p95 | Lines (missing, duplicated) | Load (1 min) | Seed (spec) p50 / p95 |\n")
		b.WriteString("|---|---|---|---|---|---|\n")
		for _, name := range modeOrder {
			m, ok := r.Modes[name]
			if !ok {
				if name == "mcp_following" {
					fmt.Fprintf(&b, "| %s | not measured yet | | | | |\n", modeLabels[name])
				}
				continue
			}
			if m.Error != "" {
				fmt.Fprintf(&b, "| %s | failed: %s | | | | %s |\n", modeLabels[name], m.Error, orDash(seed[name]))
				continue
			}
			fmt.Fprintf(&b, "| %s | %.2f / %.2f / %.2f ms (%.2f) | %.0f / %.0f ms | %d × %d (%d, %d) | %s | %s |\n",
				modeLabels[name], m.DelayP50Ms, m.DelayP95Ms, m.DelayP99Ms, m.DelayMaxMs, m.RecordedP50Ms, m.RecordedP95Ms,
				m.Runs, m.LinesPerRun, m.Missing, m.Duplicates, loads(m.LoadAvg), orDash(seed[name]))
		}
	}
	return b.String()
}

func loads(ls []float64) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprintf("%.1f", l))
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// writeReadme puts the section between the markers of path, appending the markers when the
// README has none yet.
func writeReadme(path string, reports []report) error {
	return benchkit.WriteSection(path, beginMarker, endMarker, section(reports))
}

// latestReports reads the newest turns results file of each provider in dir.
func latestReports(dir string) ([]report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*-turns-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files) // dated names: the newest last
	newest := map[string]report{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		newest[r.Provider] = r
	}
	var order []string
	for p := range newest {
		order = append(order, p)
	}
	sort.Strings(order)
	out := make([]report, 0, len(order))
	for _, p := range order {
		out = append(out, newest[p])
	}
	return out, nil
}
