// Command cpu measures what a line costs in CPU, as instructions counted by valgrind's
// cachegrind (`--cache-sim=no`, the measured process with
// GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off): hangar's REST SSE exec streams, hangar's MCP exec with progress read by a bare HTTP client, the relay
// floor (benchkit's one-goroutine relay of the daemon's stream) and hangar-envd. Only the
// measured process runs under valgrind; the clients and shells run natively. For each, three
// runs of the same length: idle, S streams × the low line count, S × the high line count.
// The marginal cost of a line is (Ir high − Ir low) ÷ the extra lines; the fixed cost of a
// stream (an exec, a tools/call) is (Ir low − Ir idle) ÷ S less its lines' marginal cost. Instruction
// counts are what a loaded, shared machine changes least. It writes
// bench/results/<date>-cpu.json and its section of bench/README.md (issue 31).
//
//	go run ./scripts/bench/cpu
//	go run ./scripts/bench/cpu -subjects rest,mcp -seconds 5
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

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// config is what one invocation measures.
type config struct {
	subjects  []string
	streams   int
	low, high int // lines per stream in the low and high runs
	seconds   int // how long every run's load lasts
	runs      int // repeats of each subject's three runs; the medians are reported
	hangar    string
	outDir    string
	readme    string
	keep      string // where valgrind's files are kept ("": not kept)
	godebug   string // more GODEBUG settings for the measured process, after asyncpreemptoff=1
	date      string
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == benchkit.RelayVerb {
		fmt.Fprintln(os.Stderr, "cpu relay:", benchkit.RelayMain(os.Args[2], os.Args[3]))
		os.Exit(1)
	}
	var c config
	subjects := flag.String("subjects", "rest,mcp,relay_floor,envd", "what to measure: rest, mcp, relay_floor, envd")
	flag.IntVar(&c.streams, "streams", 64, "concurrent streams")
	flag.IntVar(&c.low, "low", 20, "lines per stream in the low run")
	flag.IntVar(&c.high, "high", 100, "lines per stream in the high run")
	flag.IntVar(&c.seconds, "seconds", 10, "how long each run's streams print (the same in every run)")
	flag.IntVar(&c.runs, "runs", 1, "repeats of each subject's idle, low and high runs (medians reported)")
	flag.StringVar(&c.hangar, "hangar", "", "a hangar binary with hangar-envd beside it (empty: build both)")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose cpu section is rewritten (empty: none)")
	flag.StringVar(&c.keep, "keep", "", "keep each run's cachegrind.out in this folder, to read with cg_annotate or cg_diff (high against low: where a line's instructions go)")
	flag.StringVar(&c.godebug, "godebug", "", "more GODEBUG settings for the measured process (e.g. gcshrinkstackoff=1), to find what a cost depends on; results measured so say so in their method")
	flag.Parse()
	c.subjects = strings.Split(*subjects, ",")
	for _, s := range c.subjects {
		if _, ok := subjectsByName[s]; !ok {
			fmt.Fprintf(os.Stderr, "cpu: -subjects: unknown subject %q\n", s)
			os.Exit(2)
		}
	}
	if c.streams < 1 || c.low < 1 || c.high <= c.low || c.seconds < 1 || c.runs < 1 {
		fmt.Fprintln(os.Stderr, "cpu: want -streams, -low, -seconds and -runs of at least 1, and -high above -low")
		os.Exit(2)
	}
	c.date = time.Now().UTC().Format("2006-01-02")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "cpu:", err)
		os.Exit(1)
	}
}
