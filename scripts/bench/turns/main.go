// Command turns measures how fast a turn's run-log lines reach a client as events, against a
// hangar it starts itself on loopback: the command agent replays a real fixture log (from
// ../shared/fixtures/runlogs) a line every 100 ms, stamping each line with the time it prints
// it, and a reader of GET /api/sessions/{ref}/events/stream takes each event's delay from that
// stamp. Modes: the run log followed (the default) and polled (HANGAR_STREAM_TURN_LOGS=false,
// every 5 s), on the local and Docker providers. It writes
// bench/results/<date>-turns-<provider>.json and its section of bench/README.md.
//
//	go run ./scripts/bench/turns                        # local and docker (when an engine answers)
//	go run ./scripts/bench/turns -providers docker -runs 1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is what one invocation measures.
type config struct {
	providers   []string
	runs        int // following runs per provider
	lines       int // lines per following run
	pollRuns    int
	pollLines   int
	interval    time.Duration
	pollSeconds int
	fixture     string
	outDir      string
	readme      string // "": do not touch a README
	hangar      string // a built hangar binary; "": build one
	date        string
}

func main() {
	var c config
	providers := flag.String("providers", "local,docker", "providers to measure (docker is skipped with a note when no engine answers)")
	flag.IntVar(&c.runs, "runs", 3, "turns measured per provider with the run log followed")
	flag.IntVar(&c.lines, "lines", 99, "run-log lines per followed turn (at most the fixture's)")
	flag.IntVar(&c.pollRuns, "poll-runs", 1, "turns measured per provider with the run log polled (0: skip)")
	flag.IntVar(&c.pollLines, "poll-lines", 50, "run-log lines per polled turn")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "time between run-log lines")
	flag.IntVar(&c.pollSeconds, "poll-seconds", 5, "HANGAR_SESSION_POLL_SECONDS of the polled mode")
	flag.StringVar(&c.fixture, "fixture", "../shared/fixtures/runlogs/claude_ruff-fix_27-tool-calls_success.jsonl", "the run log replayed (JSON objects, one a line)")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose section is refreshed (empty: none)")
	flag.StringVar(&c.hangar, "hangar", "", "a static hangar binary to run (empty: build ./cmd/hangar)")
	readmeOnly := flag.Bool("readme-only", false, "only rewrite the README's section from the results already in -out")
	flag.Parse()
	if *readmeOnly {
		reports, err := latestReports(c.outDir)
		if err == nil {
			err = writeReadme(c.readme, reports)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "turns:", err)
			os.Exit(1)
		}
		return
	}
	for _, p := range strings.Split(*providers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.providers = append(c.providers, p)
		}
	}
	c.date = time.Now().UTC().Format("2006-01-02")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runAll(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "turns:", err)
		os.Exit(1)
	}
}
