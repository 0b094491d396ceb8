// Command streams measures how fast output reaches hangar's clients, against a hangar it starts
// itself on loopback: a command printing a stamped line every 100 ms for 3 s, 5 runs per mode,
// over MCP progress, REST SSE, process attach, exec with the result at the end and terminal
// polling, beside the daemon's own stream read directly and `docker exec`; then N concurrent
// streams, pacing, and unpaced throughput. It writes bench/results/<date>-streams-<provider>.json
// and refreshes the table in bench/README.md. See spec/streaming.md, "Numbers".
//
//	go run ./scripts/bench/streams                     # local and docker (when an engine answers)
//	go run ./scripts/bench/streams -providers local -runs 3
//	go run ./scripts/bench/streams -providers local -modes raw_daemon,rest_exec_stream -scale '' -pace-bytes 0 -throughput-mib 0
//	go run ./scripts/bench/streams -scale-step 1024,2048,4096,8192 -scale-seconds 20 -background 10000   # the scale mode
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// config is what one invocation measures.
type config struct {
	providers     []string
	modes         map[string]bool // the modes to measure; nil: all
	runs          int
	lines         int
	interval      time.Duration
	scale         []int
	scaleSeconds  int
	scaleDaemon   bool  // also run each scale load from the daemon directly (the floor)
	paceBytes     int64 // streamed at the default pace (1 MiB/s)
	throughputMiB int64 // streamed unpaced
	outDir        string
	readme        string // "": do not touch a README
	hangar        string // a built hangar binary; "": build one
	// The scale mode (scale.go): when scaleSteps or background is set, only it runs.
	scaleSteps          []int
	scaleH2C            bool // the scale mode's client speaks h2c to hangar, not HTTP/1.1
	background          int
	backgroundSandboxes int
	date                string
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == benchkit.RelayVerb {
		// The relay serves until it is killed: it returns only on an error.
		fmt.Fprintln(os.Stderr, "streams relay:", benchkit.RelayMain(os.Args[2], os.Args[3]))
		os.Exit(1)
	}
	var c config
	providers := flag.String("providers", "local,docker", "providers to measure (docker is skipped with a note when no engine answers)")
	scale := flag.String("scale", "64,256,512", "concurrent streams for the scale test (empty: none)")
	modeList := flag.String("modes", "", "the modes to measure, e.g. raw_daemon,rest_exec_stream,mcp_exec_stream (empty: all; none: skip them)")
	flag.IntVar(&c.runs, "runs", 5, "runs per mode")
	flag.IntVar(&c.lines, "lines", 30, "stamped lines per run")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "time between lines")
	flag.IntVar(&c.scaleSeconds, "scale-seconds", 10, "how long each scale stream prints (10 lines a second)")
	flag.BoolVar(&c.scaleDaemon, "scale-daemon", true, "also run each scale load from the sandbox's daemon directly, without hangar (the floor)")
	flag.Int64Var(&c.paceBytes, "pace-bytes", 4<<20, "bytes streamed at the default pace to measure it (0: skip)")
	flag.Int64Var(&c.throughputMiB, "throughput-mib", 256, "MiB streamed unpaced through one SSE stream (0: skip)")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose table is refreshed (empty: none)")
	flag.StringVar(&c.hangar, "hangar", "", "a static hangar binary to run (empty: build ./cmd/hangar)")
	cpuProfile := flag.String("cpuprofile", "", "write this program's own CPU profile (the client's side) to this file")
	scaleSteps := flag.String("scale-step", "", "the scale mode: N concurrent REST streams at a line a second for -scale-seconds, stepped up through these N (e.g. 1024,2048,4096,8192) until a target breaks; writes <date>-scale.json and runs nothing else")
	flag.BoolVar(&c.scaleH2C, "scale-h2c", false, "the scale mode: the client speaks h2c (HTTP/2 without TLS, many streams on a connection) to hangar instead of HTTP/1.1 (a connection a stream)")
	flag.IntVar(&c.background, "background", 0, "the scale mode: this many background processes across -background-sandboxes sandboxes, each attached (0: none)")
	flag.IntVar(&c.backgroundSandboxes, "background-sandboxes", 4, "sandboxes the -background processes are spread over")
	readmeOnly := flag.Bool("readme-only", false, "only rewrite the README's table from the results already in -out")
	flag.Parse()
	if *readmeOnly {
		reports, err := latestReports(c.outDir)
		if err == nil {
			err = writeReadme(c.readme, reports)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "streams:", err)
			os.Exit(1)
		}
		return
	}
	c.providers = split(*providers)
	if *modeList != "" {
		c.modes = map[string]bool{}
		for _, m := range split(*modeList) {
			if m != "none" && !knownMode(m) {
				fmt.Fprintf(os.Stderr, "streams: -modes: unknown mode %q\n", m)
				os.Exit(2)
			}
			c.modes[m] = true
		}
	}
	for _, s := range split(*scale) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "streams: -scale %q: want positive numbers\n", *scale)
			os.Exit(2)
		}
		c.scale = append(c.scale, n)
	}
	for _, s := range split(*scaleSteps) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "streams: -scale-step %q: want positive numbers\n", *scaleSteps)
			os.Exit(2)
		}
		c.scaleSteps = append(c.scaleSteps, n)
	}
	c.date = time.Now().UTC().Format("2006-01-02")
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "streams: -cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := runAll(ctx, c, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "streams:", err)
	}
	stop()
	pprof.StopCPUProfile()
	if err != nil {
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
