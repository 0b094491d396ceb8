// Command envd measures the in-sandbox daemon: its footprint (binary size, RSS and OS threads
// at rest and with 64 streaming processes) and its wire speed (each line's delay, one stream's
// throughput, 64 concurrent streams' per-line delay). By default it starts the daemons itself
// on loopback, hangar-envd built from this tree beside the daemon before it (`hangar envd`
// built at -old-rev), the runs of both interleaved so a loaded machine weighs on both alike,
// and reports start-up time on Docker (sandbox create to daemon healthy). With -url it
// measures the wire speed of any envd, E2B's included (bench/README.md says how). It writes
// bench/results/<date>-envd.json and its section of bench/README.md.
//
//	go run ./scripts/bench/envd                      # hangar-envd beside the daemon before it
//	go run ./scripts/bench/envd -runs 1 -docker=false
//	go run ./scripts/bench/envd -url https://49983-<id>.e2b.app -token <token> -name e2b-envd
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what one invocation measures.
type config struct {
	runs          int
	lines         int
	interval      time.Duration
	streams       int
	streamSeconds int
	throughputMiB int64
	docker        bool
	dockerImage   string
	oldRev        string // the revision whose `hangar envd` is "before"
	oldBin        string // or a binary of it, run as `<bin> envd`
	newBin        string // hangar-envd; "": build ./cmd/hangar-envd
	url, token    string // -url mode: only the wire measures, against that daemon
	name          string
	outDir        string
	readme        string
	date          string
}

// lastBeforeEnvd is the last commit before hangar-envd: its daemon is the "before" figures.
const lastBeforeEnvd = "fb374da"

func main() {
	var c config
	flag.IntVar(&c.runs, "runs", 3, "runs of each measure per daemon, interleaved")
	flag.IntVar(&c.lines, "lines", 30, "stamped lines per latency run")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "time between stamped lines")
	flag.IntVar(&c.streams, "streams", 64, "concurrent streaming processes")
	flag.IntVar(&c.streamSeconds, "stream-seconds", 5, "how long each concurrent stream prints (10 lines a second)")
	flag.Int64Var(&c.throughputMiB, "throughput-mib", 256, "MiB one process writes to stdout, for throughput")
	flag.BoolVar(&c.docker, "docker", true, "also time sandbox create to daemon healthy on Docker (skipped with a note without an engine or image)")
	flag.StringVar(&c.dockerImage, "docker-image", "hangar-test:busybox-bash", "the image of the Docker start-up runs (never pulled; the provider tests build this one)")
	flag.StringVar(&c.oldRev, "old-rev", lastBeforeEnvd, "git revision whose `hangar envd` is measured as before (empty: none)")
	flag.StringVar(&c.oldBin, "old-bin", "", "a binary run as `<bin> envd` as before, instead of building -old-rev")
	flag.StringVar(&c.newBin, "new-bin", "", "a hangar-envd binary (empty: build ./cmd/hangar-envd)")
	flag.StringVar(&c.url, "url", "", "measure only this daemon's wire speed (http://host:port, https://49983-<id>.e2b.app)")
	flag.StringVar(&c.token, "token", "", "the -url daemon's access token (X-Access-Token)")
	flag.StringVar(&c.name, "name", "", "the -url daemon's name in the results (default: its URL)")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose envd section is rewritten (empty: none)")
	flag.Parse()
	c.date = time.Now().UTC().Format("2006-01-02")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench envd:", err)
		os.Exit(1)
	}
}
