package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// report is one provider's results file.
type report struct {
	Date     string            `json:"date"`
	Provider string            `json:"provider"`
	Machine  machine           `json:"machine"`
	Load     load              `json:"load"`
	Method   string            `json:"method"`
	Modes    map[string]stats  `json:"modes"`
	Gaps     map[string]gap    `json:"gaps_over_relay_floor,omitempty"` // by mode (gaps.go)
	Scale    []scaleResult     `json:"scale,omitempty"`
	Pacing   *rateResult       `json:"pacing,omitempty"`
	Unpaced  *rateResult       `json:"unpaced_throughput,omitempty"`
	Targets  map[string]string `json:"targets"`
	Notes    []string          `json:"notes,omitempty"`
}

// load is the machine's load average (/proc/loadavg: 1, 5 and 15 minutes) before and after a
// provider's run, with its CPU count in machine: a run on a loaded machine is slower, and not
// a regression.
type load struct {
	Before []float64 `json:"before,omitempty"`
	After  []float64 `json:"after,omitempty"`
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute averages, or nil where there is none.
func loadAvg() []float64 { return benchkit.LoadAvgs() }

type machine struct {
	Cores        int    `json:"cores"`
	MemoryBytes  int64  `json:"memory_bytes"`
	GoVersion    string `json:"go_version"`
	HangarCommit string `json:"hangar_commit"`
	Kernel       string `json:"kernel,omitempty"`
}

var targets = map[string]string{
	"first_line_overhead":   "<= 2 ms p50 and <= 5 ms p95 on local; <= 5 ms p50 on docker",
	"line_delay":            "<= 0.3 ms p50 and <= 1 ms p95",
	"vs_raw_daemon":         "per line, p50 and p95: REST <= 1.15x and MCP <= 1.3x the raw daemon stream (issue 11)",
	"vs_relay_floor":        "relay_floor is the least any process between the daemon and a client adds; hangar's ratio cannot be below its",
	"vs_docker_exec":        "hangar's first line no later than docker exec's",
	"scale_512":             "p95 per-line <= 5 ms and p99 < 10 ms (issue 11) with RSS <= 200 MiB; the via daemon entries are the same load without hangar",
	"pacing":                "within +-5 % of HANGAR_STREAM_BYTES_PER_SECOND",
	"seed_exec_stream":      "spec: 112 / 117 ms first line, 0.8 / 2.0 ms per line",
	"seed_process_attach":   "spec: 111 / 116 ms first line, 0.9 / 2.3 ms per line",
	"seed_exec_result":      "spec: 3,124 / 3,132 ms first line, 1,553 / 2,909 ms per line",
	"seed_terminal_polling": "spec: 1,058 / 1,063 ms first line, 503 / 981 ms per line",
}

func machineInfo() machine {
	m := machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.MemoryBytes = kb << 10
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.HangarCommit = strings.TrimSpace(string(out))
		// Changes under bench/ are this program's own results, not the code measured.
		if out, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench").Output(); len(out) > 0 {
			m.HangarCommit += "-dirty"
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func dockerUp(ctx context.Context) (*client.Client, bool) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, false
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, false
	}
	return cli, true
}

func runAll(ctx context.Context, c config, out io.Writer) error {
	work, err := os.MkdirTemp("", "hangar-bench-")
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
	if len(c.scaleSteps) > 0 || c.background > 0 {
		return runScale(ctx, c, work, out)
	}
	var reports []report
	for _, p := range c.providers {
		r, err := runProvider(ctx, c, p, work, out)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if r == nil {
			continue
		}
		path, err := benchkit.WriteResults(c.outDir, c.date+"-streams-"+p+".json", r)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "wrote", path)
		reports = append(reports, *r)
	}
	if c.readme != "" && len(reports) > 0 {
		all, err := latestReports(c.outDir)
		if err != nil {
			return err
		}
		return writeReadme(c.readme, all)
	}
	return nil
}

func runProvider(ctx context.Context, c config, provider, work string, out io.Writer) (*report, error) {
	r := &report{Date: c.date, Provider: provider, Machine: machineInfo(), Load: load{Before: loadAvg()}, Modes: map[string]stats{}, Targets: targets,
		Method: fmt.Sprintf("%d runs of a command printing a line every %v for %v, each line stamped with the time it was printed (bash $EPOCHREALTIME); first line = from the request to the client having line 1; overhead = line 1 received minus printed; line delay = each line received minus printed",
			c.runs, c.interval, time.Duration(c.lines)*c.interval)}
	create := map[string]any{"name": "bench", "provider": provider}
	if provider == "docker" {
		cli, ok := dockerUp(ctx)
		if !ok {
			fmt.Fprintln(out, "docker: no engine answers; skipped")
			return nil, nil
		}
		image, err := dockertest.EnsureImage(ctx, cli)
		cli.Close()
		if err != nil {
			return nil, err
		}
		create["image"] = image
	}
	dir := filepath.Join(work, provider)
	os.MkdirAll(dir, 0o700)
	// Limits raised so the scale test fits; the pace stays the default 1 MiB/s.
	srv, err := startServer(ctx, c.hangar, dir, "HANGAR_STREAM_MAX_PER_TOKEN=4096", "HANGAR_STREAM_MAX_PER_USER=8192", "HANGAR_STREAM_MAX_TOTAL=8192")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	b := &bench{srv: srv, sandbox: "bench", want: c.lines}
	var sb struct {
		ProviderID string `json:"provider_id"`
	}
	if err := srv.api(ctx, "POST", "/api/sandboxes", create, &sb); err != nil {
		return nil, err
	}
	b.container = sb.ProviderID
	defer b.destroy(context.WithoutCancel(ctx))
	if err := b.connectMCP(ctx); err != nil {
		return nil, err
	}

	defer func() { r.Load.After = loadAvg() }()
	fmt.Fprintf(out, "%-8s load before: %v on %d CPUs\n", provider, r.Load.Before, r.Machine.Cores)
	runModes(ctx, c, b, provider, r, out)
	for _, n := range c.scale {
		s := b.scale(ctx, n, c.scaleSeconds, 100*time.Millisecond, false)
		r.Scale = append(r.Scale, s)
		fmt.Fprintf(out, "%-8s scale %4d streams: per line %.2f / %.2f / %.2f ms (p50/p95/p99), RSS %.1f MiB, %d goroutines, hangar CPU %.1f µs a line, %d lines missing, %d failed %s\n",
			provider, n, s.DelayP50Ms, s.DelayP95Ms, s.DelayP99Ms, float64(s.MaxRSSBytes)/(1<<20), s.MaxGoroutines, s.HangarCPUPerLine, s.Missing, s.Failed, s.FirstError)
		if c.scaleDaemon {
			s := b.scale(ctx, n, c.scaleSeconds, 100*time.Millisecond, true)
			r.Scale = append(r.Scale, s)
			fmt.Fprintf(out, "%-8s scale %4d streams, the daemon read directly: per line %.2f / %.2f / %.2f ms (p50/p95/p99), %d lines missing, %d failed %s\n",
				provider, n, s.DelayP50Ms, s.DelayP95Ms, s.DelayP99Ms, s.Missing, s.Failed, s.FirstError)
		}
	}
	if c.paceBytes > 0 {
		pr, err := b.rate(ctx, c.paceBytes)
		if err != nil {
			r.Notes = append(r.Notes, "pacing: "+err.Error())
		} else {
			pr.Setting = 1 << 20
			pr.ErrorPercent = (pr.BytesPerSecond/float64(pr.Setting) - 1) * 100
			r.Pacing = &pr
			fmt.Fprintf(out, "%-8s pacing: %.0f bytes/s against 1048576 (%+.1f %%)\n", provider, pr.BytesPerSecond, pr.ErrorPercent)
		}
	}
	if c.throughputMiB > 0 {
		tp, err := unpaced(ctx, c, provider, create, work)
		if err != nil {
			r.Notes = append(r.Notes, "unpaced throughput: "+err.Error())
		} else {
			r.Unpaced = tp
			fmt.Fprintf(out, "%-8s unpaced: %.1f MiB/s over %d MiB %s\n", provider, tp.BytesPerSecond/(1<<20), tp.Bytes>>20, tp.Closed)
		}
	}
	return r, nil
}

// runModes measures each mode (REST, MCP, the raw daemon...) the provider has: c.runs runs of
// the stamped command each, summarised into r.Modes. The modes take turns, one run each, so
// that a change in the machine's load falls on all of them alike and their ratios hold. A run
// that fails ends its mode, with the error as the mode's note.
func runModes(ctx context.Context, c config, b *bench, provider string, r *report, out io.Writer) {
	cmd := stampedCommand(c.lines, c.interval)
	wait := time.Duration(c.lines) * c.interval
	var ms []mode
	for _, m := range modes {
		if (!m.docker || provider == "docker") && (c.modes == nil || c.modes[m.name]) {
			ms = append(ms, m)
		}
	}
	runs := make([][]run, len(ms))
	notes := make([]string, len(ms))
	for i := 0; i < c.runs; i++ {
		for j, m := range ms {
			if notes[j] != "" {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, wait+time.Minute)
			rr, err := m.run(b, rctx, cmd, wait)
			cancel()
			if err != nil {
				notes[j] = err.Error()
				continue
			}
			runs[j] = append(runs[j], rr)
		}
	}
	floor := -1
	for j, m := range ms {
		if m.name == "relay_floor" {
			floor = j
		}
	}
	for j, m := range ms {
		st := summarise(runs[j], c.lines)
		st.Note = notes[j]
		r.Modes[m.name] = st
		fmt.Fprintf(out, "%-8s %-20s first line %8.1f / %8.1f ms  overhead %7.2f / %7.2f ms  per line %7.2f / %7.2f ms %s\n",
			provider, m.name, st.FirstLineP50Ms, st.FirstLineP95Ms, st.FirstOverheadP50Ms, st.FirstOverheadP95Ms, st.DelayP50Ms, st.DelayP95Ms, st.Note)
		if floor < 0 || j == floor {
			continue
		}
		if g, ok := gapOver(runs[j], runs[floor]); ok {
			if r.Gaps == nil {
				r.Gaps = map[string]gap{}
			}
			r.Gaps[m.name] = g
			fmt.Fprintf(out, "%-8s %-20s per line over the relay floor: %+.3f ms p50 (95 %% of resamplings of its %d runs: %+.3f to %+.3f)\n",
				provider, m.name, g.P50Ms, g.Pairs, g.LowMs, g.HighMs)
		}
	}
	if raw, ok := r.Modes["raw_daemon"]; ok && raw.DelayP50Ms > 0 && raw.DelayP95Ms > 0 {
		for _, m := range ms {
			if st := r.Modes[m.name]; m.name != "raw_daemon" && st.Runs > 0 && st.DelayP50Ms < 100 {
				fmt.Fprintf(out, "%-8s %-20s per line vs the raw daemon: %.2fx / %.2fx (p50/p95)\n", provider, m.name, st.DelayP50Ms/raw.DelayP50Ms, st.DelayP95Ms/raw.DelayP95Ms)
			}
		}
	}
}

// unpaced measures one SSE stream with pacing and the cap out of the way, on its own server.
func unpaced(ctx context.Context, c config, provider string, create map[string]any, work string) (*rateResult, error) {
	dir := filepath.Join(work, provider+"-unpaced")
	os.MkdirAll(dir, 0o700)
	srv, err := startServer(ctx, c.hangar, dir, "HANGAR_STREAM_BYTES_PER_SECOND=1024GiB", "HANGAR_STREAM_MAX_BYTES=64GiB")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	// Its own sandbox name: the first server's sandbox (a container named after it, on Docker)
	// still exists.
	own := map[string]any{}
	for k, v := range create {
		own[k] = v
	}
	own["name"] = "bench-unpaced"
	if err := srv.api(ctx, "POST", "/api/sandboxes", own, nil); err != nil {
		return nil, err
	}
	b := &bench{srv: srv, sandbox: "bench-unpaced"}
	defer b.destroy(context.WithoutCancel(ctx))
	tp, err := b.rate(ctx, c.throughputMiB<<20)
	return &tp, err
}
