// Command watch measures how fast a change in a sandbox's directory reaches hangar's clients:
// a writer in the sandbox creates a file every 100 ms, each named by when it was made, while
// an SSE reader of GET /api/sandboxes/{ref}/watch and an MCP subscriber to
// hangar://sandboxes/<ref>/watch?path= (go-sdk's client, reading &since= at each update) each
// take every create event's delay from its name. On the local and Docker providers; writes
// bench/results/<date>-watch-<provider>.json and its section of bench/README.md.
//
//	go run ./scripts/bench/watch
//	go run ./scripts/bench/watch -providers local -runs 1
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

type config struct {
	providers []string
	runs      int
	files     int
	interval  time.Duration
	outDir    string
	readme    string
	hangar    string
	date      string
}

// result is one reader's figures over the runs.
type result struct {
	Received   int     `json:"received"`
	Missing    int     `json:"missing"`
	DelayP50Ms float64 `json:"delay_p50_ms"`
	DelayP95Ms float64 `json:"delay_p95_ms"`
	DelayP99Ms float64 `json:"delay_p99_ms"`
	DelayMaxMs float64 `json:"delay_max_ms"`
	Error      string  `json:"error,omitempty"`
}

// report is one provider's results file.
type report struct {
	Date     string             `json:"date"`
	Provider string             `json:"provider"`
	Machine  benchkit.Machine   `json:"machine"`
	Method   string             `json:"method"`
	Runs     int                `json:"runs"`
	Files    int                `json:"files_per_run"`
	LoadAvg  []float64          `json:"load_avg_1m"`
	Readers  map[string]*result `json:"readers"`
	Target   string             `json:"target"`
}

func main() {
	var c config
	providers := flag.String("providers", "local,docker", "providers to measure (docker is skipped with a note when no engine answers)")
	flag.IntVar(&c.runs, "runs", 3, "runs per provider")
	flag.IntVar(&c.files, "files", 30, "files made per run")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "time between files")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose section is refreshed (empty: none)")
	flag.StringVar(&c.hangar, "hangar", "", "a static hangar binary to run, hangar-envd beside it (empty: build both)")
	flag.Parse()
	c.providers = strings.Split(*providers, ",")
	c.date = time.Now().UTC().Format("2006-01-02")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "watch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	work, err := os.MkdirTemp("", "hangar-bench-watch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if c.hangar == "" {
		fmt.Fprintln(out, "building hangar and hangar-envd")
		if c.hangar, err = benchkit.Build(ctx, work); err != nil {
			return err
		}
	}
	var reports []report
	for _, p := range c.providers {
		r, err := runProvider(ctx, c, p, filepath.Join(work, p), out)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if r == nil {
			continue
		}
		path, err := benchkit.WriteResults(c.outDir, c.date+"-watch-"+p+".json", r)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "wrote", path)
		reports = append(reports, *r)
	}
	if c.readme == "" || len(reports) == 0 {
		return nil
	}
	return writeReadme(c.readme, reports)
}

func runProvider(ctx context.Context, c config, provider, dir string, out io.Writer) (*report, error) {
	create := map[string]any{"name": "bench", "provider": provider}
	if provider == "docker" {
		image, up, err := benchkit.DockerImage(ctx)
		if !up {
			fmt.Fprintln(out, "docker: no engine answers; skipped")
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		create["image"] = image
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	srv, err := benchkit.Start(ctx, c.hangar, dir)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if err := srv.API(ctx, "POST", "/api/sandboxes", create, nil); err != nil {
		return nil, err
	}
	defer srv.API(context.WithoutCancel(ctx), "DELETE", "/api/sandboxes/bench", nil, nil)
	r := &report{Date: c.date, Provider: provider, Machine: benchkit.MachineInfo(), Runs: c.runs, Files: c.files,
		Readers: map[string]*result{}, Target: "<= 5 ms p50 from a file made in the sandbox to its event at an SSE reader (the MCP subscriber adds the 250 ms update coalescing)",
		Method: fmt.Sprintf("a writer in the sandbox makes a file every %v in a directory of the workdir, named by bash's $EPOCHREALTIME just before; "+
			"an SSE reader of the REST watch and an MCP subscriber (go-sdk, 2025-11-25, reading &since= at each update) take each create event's delay from the name", c.interval)}
	delays := map[string][]float64{}
	for run := 0; run < c.runs; run++ {
		r.LoadAvg = append(r.LoadAvg, benchkit.LoadAvg())
		got, err := measure(ctx, c, srv, run)
		if err != nil {
			return nil, err
		}
		for reader, ds := range got {
			delays[reader] = append(delays[reader], ds...)
		}
	}
	for _, reader := range []string{"sse", "mcp"} {
		ds := delays[reader]
		res := &result{Received: len(ds), Missing: c.runs*c.files - len(ds),
			DelayP50Ms: benchkit.Percentile(ds, 50), DelayP95Ms: benchkit.Percentile(ds, 95), DelayP99Ms: benchkit.Percentile(ds, 99), DelayMaxMs: benchkit.Percentile(ds, 100)}
		r.Readers[reader] = res
		fmt.Fprintf(out, "%-7s %s: %d files: delay %.2f / %.2f / %.2f ms (p50/p95/p99), max %.2f, %d missing, load %v\n",
			provider, reader, res.Received, res.DelayP50Ms, res.DelayP95Ms, res.DelayP99Ms, res.DelayMaxMs, res.Missing, r.LoadAvg)
	}
	return r, nil
}

// measure runs one writer with both readers watching its directory, and returns each reader's
// delays in ms.
func measure(ctx context.Context, c config, srv *benchkit.Server, run int) (map[string][]float64, error) {
	sub := fmt.Sprintf("w%d", run)
	if err := srv.API(ctx, "POST", "/api/sandboxes/bench/exec", map[string]any{"command": "mkdir -p " + sub}, nil); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(c.files)*c.interval+time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := map[string][]float64{}
	add := func(reader, name string, at time.Time) {
		_, stamp, ok := strings.Cut(name, "_")
		ts, err := strconv.ParseFloat(stamp, 64)
		if !ok || err != nil {
			return
		}
		made := time.UnixMicro(int64(math.Round(ts * 1e6)))
		mu.Lock()
		got[reader] = append(got[reader], float64(at.Sub(made).Microseconds())/1000)
		mu.Unlock()
	}
	done := func(reader string) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[reader]) >= c.files
	}
	ready := make(chan error, 2)
	finished := make(chan error, 2)
	go func() { finished <- readSSE(rctx, srv, sub, ready, add, done) }()
	go func() { finished <- readMCP(rctx, srv, sub, ready, add, done) }()
	for range 2 {
		if err := <-ready; err != nil {
			return nil, err
		}
	}
	writer := fmt.Sprintf(`exec 9<> <(:); i=0; while [ $i -lt %d ]; do i=$((i+1)); read -t %.3f -u 9; : > "%s/${i}_$EPOCHREALTIME"; done`,
		c.files, c.interval.Seconds(), sub)
	if err := srv.API(rctx, "POST", "/api/sandboxes/bench/exec", map[string]any{"command": writer}, nil); err != nil {
		return nil, err
	}
	for range 2 {
		if err := <-finished; err != nil {
			return nil, err
		}
	}
	return got, nil
}

// readSSE reads the REST watch of dir until done says the reader has every file.
func readSSE(ctx context.Context, srv *benchkit.Server, dir string, ready chan<- error, add func(reader, name string, at time.Time), done func(string) bool) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/sandboxes/bench/watch?path="+dir, nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	resp, err := srv.HTTP.Do(req)
	if err != nil {
		ready <- err
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		err := fmt.Errorf("GET watch: %d %s", resp.StatusCode, b)
		ready <- err
		return err
	}
	ready <- nil
	errDone := fmt.Errorf("done")
	err = benchkit.SSEEvents(resp.Body, func(_ string, data []byte) error {
		at := time.Now()
		var ev struct{ Name, Type string }
		if json.Unmarshal(data, &ev) == nil && ev.Type == "create" {
			add("sse", ev.Name, at)
		}
		if done("sse") {
			return errDone
		}
		return nil
	})
	if err == errDone {
		return nil
	}
	return fmt.Errorf("the SSE watch ended early: %v", err)
}

// readMCP subscribes to the watch resource of dir and reads what is new at each update.
func readMCP(ctx context.Context, srv *benchkit.Server, dir string, ready chan<- error, add func(reader, name string, at time.Time), done func(string) bool) error {
	uri := "hangar://sandboxes/bench/watch?path=" + dir
	sub, err := srv.Subscribe(ctx, uri)
	ready <- err
	if err != nil {
		return err
	}
	defer sub.Close()
	var last int64
	for !done("mcp") {
		select {
		case <-sub.Updated:
		case <-ctx.Done():
			return fmt.Errorf("the MCP subscriber: %w", ctx.Err())
		}
		var page struct {
			Events []struct{ Name, Type string } `json:"events"`
			Next   int64                         `json:"next"`
		}
		if err := sub.Read(ctx, fmt.Sprintf("%s&since=%d", uri, last), &page); err != nil {
			return err
		}
		at := time.Now()
		for _, ev := range page.Events {
			if ev.Type == "create" {
				add("mcp", ev.Name, at)
			}
		}
		last = page.Next
	}
	return nil
}

// The README's watch section lives between these markers.
const (
	beginMarker = "<!-- watch:begin (written by scripts/bench/watch) -->"
	endMarker   = "<!-- watch:end -->"
)

func writeReadme(path string, reports []report) error {
	var b strings.Builder
	b.WriteString("\n## File watches\n\n")
	b.WriteString("From a file made in a sandbox's directory (a writer makes one every 100 ms, named by the time\n")
	b.WriteString("just before) to its create event at a reader of the directory's watch (`scripts/bench/watch`):\n")
	b.WriteString("an SSE reader of `GET /api/sandboxes/{ref}/watch` and an MCP subscriber to\n")
	b.WriteString("`hangar://sandboxes/<ref>/watch?path=` reading `&since=` at each update, both at once on one\n")
	b.WriteString("shared daemon watch. Target: ≤ 5 ms p50 at the SSE reader. The MCP subscriber is told at once of\n")
	b.WriteString("the first change, then at most every 250 ms (the spec's coalescing): at 10 files a second its\n")
	b.WriteString("delay is mostly that wait.\n")
	for _, r := range reports {
		var loads []string
		for _, l := range r.LoadAvg {
			loads = append(loads, fmt.Sprintf("%.1f", l))
		}
		fmt.Fprintf(&b, "\n### %s provider (%s, %d cores, hangar %s, %d runs × %d files, load %s)\n\n",
			r.Provider, r.Date, r.Machine.Cores, r.Machine.HangarCommit, r.Runs, r.Files, strings.Join(loads, ", "))
		b.WriteString("| Reader | Delay p50 / p95 / p99 (max) | Missing |\n|---|---|---|\n")
		for _, name := range []string{"sse", "mcp"} {
			res := r.Readers[name]
			label := map[string]string{"sse": "SSE (REST watch)", "mcp": "MCP subscriber"}[name]
			fmt.Fprintf(&b, "| %s | %.2f / %.2f / %.2f ms (%.2f) | %d |\n", label, res.DelayP50Ms, res.DelayP95Ms, res.DelayP99Ms, res.DelayMaxMs, res.Missing)
		}
	}
	return benchkit.WriteSection(path, beginMarker, endMarker, b.String())
}
