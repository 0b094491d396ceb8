package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// report is the results file.
type report struct {
	Date       string           `json:"date"`
	Machine    benchkit.Machine `json:"machine"`
	LoadBefore []float64        `json:"load_before"` // 1, 5 and 15 minutes
	LoadAfter  []float64        `json:"load_after"`
	Method     string           `json:"method"`
	Streams    int              `json:"streams"`
	Low        int              `json:"lines_low"`
	High       int              `json:"lines_high"`
	Seconds    int              `json:"seconds"`
	Repeats    int              `json:"repeats"` // the figures are the medians over them
	Subjects   []result         `json:"subjects"`
}

// The README's cpu section lives between these markers; the rest is left as it is.
const (
	beginMarker = "<!-- cpu:begin (written by scripts/bench/cpu) -->"
	endMarker   = "<!-- cpu:end -->"
)

// write saves rep as JSON, prints its table and rewrites the README's section.
func write(c config, rep report) error {
	path, err := benchkit.WriteResults(c.outDir, rep.Date+"-cpu.json", rep)
	if err != nil {
		return err
	}
	t := table(rep)
	fmt.Print(t)
	fmt.Println("wrote", path)
	if c.readme == "" {
		return nil
	}
	return benchkit.WriteSection(c.readme, beginMarker, endMarker, t)
}

// table renders rep: a row per subject, REST's ratio to the relay floor below.
func table(rep report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s: %d cores, load %s before and %s after (shared machine), %s, hangar %s\n\n",
		rep.Date, rep.Machine.Cores, loads(rep.LoadBefore), loads(rep.LoadAfter), rep.Machine.GoVersion, rep.Machine.HangarCommit)
	fmt.Fprintf(&b, "%d streams × %d and × %d lines over %d s, idle beside; medians of %d repeats.\n\n", rep.Streams, rep.Low, rep.High, rep.Seconds, rep.Repeats)
	b.WriteString("| Process measured | Marginal instructions a line | Fixed instructions a stream | Messages a line (high run) | Lines missing | Target (issue 31) |\n|---|---|---|---|---|---|\n")
	byName := map[string]result{}
	for _, r := range rep.Subjects {
		byName[r.Name] = r
		missing := strconv.Itoa(r.LinesMissing)
		if r.StreamsFailed > 0 {
			missing += fmt.Sprintf(" (%d streams failed: %s)", r.StreamsFailed, r.FirstStreamError)
		}
		fmt.Fprintf(&b, "| %s | %.1fk | %.2fM | %.2f | %s | %s |\n", r.Label, r.MarginalPerLine/1e3, r.FixedPerStream/1e6, r.MessagesPerLine, missing, r.Target)
	}
	if rest, ok := byName["rest"]; ok {
		if floor, ok := byName["relay_floor"]; ok && floor.MarginalPerLine > 0 {
			fmt.Fprintf(&b, "\nhangar REST a line: %.2f× the relay floor's instructions (target ≤ 1.25×).\n", rest.MarginalPerLine/floor.MarginalPerLine)
		}
	}
	return b.String()
}

func loads(l []float64) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}
