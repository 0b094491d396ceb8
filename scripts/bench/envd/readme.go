package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The README's envd section lives between these markers; the rest is left as it is.
const (
	beginMarker = "<!-- envd:begin (written by scripts/bench/envd) -->"
	endMarker   = "<!-- envd:end -->"
)

// write saves rep as JSON and prints its table; the default run also rewrites the README's
// section (a -url run, against another daemon, leaves it).
func write(c config, rep report) error {
	name := rep.Date + "-envd.json"
	if c.url != "" {
		name = rep.Date + "-envd-" + slug(rep.Daemons[0].Name) + ".json"
	}
	if err := os.MkdirAll(c.outDir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(c.outDir, name)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	t := table(rep)
	fmt.Print(t)
	fmt.Println("wrote", path)
	if c.url != "" || c.readme == "" {
		return nil
	}
	return writeReadme(c.readme, t)
}

func slug(s string) string {
	return strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(s, "-"), "-")
}

// table renders rep: one column per daemon, one row per measure, the target last.
func table(rep report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s: %d cores, load %s before and %s after (shared machine), %s, %s\n\n",
		rep.Date, rep.Machine.Cores, rep.Machine.LoadBefore, rep.Machine.LoadAfter, rep.Machine.GoVersion, rep.Machine.Commit)
	b.WriteString("| |")
	for _, d := range rep.Daemons {
		fmt.Fprintf(&b, " %s: %s |", d.Name, d.What)
	}
	b.WriteString(" Target |\n|---|")
	b.WriteString(strings.Repeat("---|", len(rep.Daemons)+1) + "\n")
	own := rep.Daemons[0].BinaryBytes > 0
	row := func(label, target string, cell func(result) string) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, d := range rep.Daemons {
			fmt.Fprintf(&b, " %s |", cell(d))
		}
		fmt.Fprintf(&b, " %s |\n", target)
	}
	if own {
		row("Binary", "≤ 20 MB", func(d result) string { return mb(d.BinaryBytes) })
		row("RSS at rest", "≤ 15 MB", func(d result) string { return mb(d.RestRSSBytes) })
		row(fmt.Sprintf("RSS with %d streaming processes (highest)", rep.Daemons[0].Streams), "≤ 30 MB", func(d result) string { return mb(d.StreamsRSSBytes) })
		row("OS threads at rest", "", func(d result) string { return fmt.Sprint(d.RestThreads) })
		row(fmt.Sprintf("OS threads with %d processes (highest)", rep.Daemons[0].Streams), "≤ 16", func(d result) string { return fmt.Sprint(d.StreamsThreads) })
	}
	row("Each line's delay p50 / p95", "no worse than before", func(d result) string { return ms(d.DelayP50Ms) + " / " + ms(d.DelayP95Ms) })
	row("Throughput, one stream (median)", "no worse than before", func(d result) string { return fmt.Sprintf("%.0f MiB/s", d.ThroughputMiBs) })
	if own {
		row("RSS while that stream runs (highest)", "", func(d result) string { return mb(d.ThroughputRSSBytes) })
	}
	row(fmt.Sprintf("%d concurrent streams, per-line delay p50 / p95 / p99", rep.Daemons[0].Streams), "no worse than before", func(d result) string {
		s := ms(d.StreamsP50Ms) + " / " + ms(d.StreamsP95Ms) + " / " + ms(d.StreamsP99Ms)
		if d.StreamsMissing > 0 {
			s += fmt.Sprintf(" (%d lines missing)", d.StreamsMissing)
		}
		return s
	})
	if own && rep.Daemons[0].StartupP50Ms > 0 {
		row("Docker: sandbox create to daemon healthy, p50 / max", "reported", func(d result) string { return ms(d.StartupP50Ms) + " / " + ms(d.StartupMaxMs) })
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s.\n", strings.TrimSuffix(n, "."))
	}
	return b.String()
}

// mb is a byte count in MB (10^6 bytes, as the targets are written).
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func ms(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f ms", v)
}

// writeReadme replaces the text between the markers of the README at path with t.
func writeReadme(path, t string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", path, beginMarker, endMarker)
	}
	s = s[:i+len(beginMarker)] + "\n" + t + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
