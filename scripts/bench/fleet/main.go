// Command fleet measures the Fleet page with many agents, in headless Chromium (Debian's
// chromium, driven with chromedp) against a hangar it starts itself on loopback with the local
// provider: N sessions (200 by default) of the command agent, then a turn on each at once that
// replays real run-log lines, each agent printing one every interval. It takes, in the page:
// the time from signing in to all N rows drawn; while every agent works, the gaps between
// animation frames and the long tasks (the main thread busy over 50 ms); the rows the stream
// changed; the page's JS heap; and, once every turn has ended in the store, how long until
// every row shows it. Writes bench/results/<date>-fleet.json and its section of
// bench/README.md.
//
//	go run ./scripts/bench/fleet
//	go run ./scripts/bench/fleet -agents 50 -lines 10
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

type config struct {
	agents   int
	lines    int
	interval time.Duration
	fixture  string
	outDir   string
	readme   string
	hangar   string
	date     string
}

// report is the results file.
type report struct {
	Date     string           `json:"date"`
	Machine  benchkit.Machine `json:"machine"`
	Method   string           `json:"method"`
	Agents   int              `json:"agents"`
	Target   string           `json:"target"`
	Snapshot float64          `json:"snapshot_drawn_ms"` // signing in → all rows drawn
	Phases   []*phase         `json:"phases"`
}

// phase is one round of a turn on every agent at once, each printing a line every Interval.
type phase struct {
	Name     string  `json:"name"`
	Interval string  `json:"interval"`
	LoadAvg  float64 `json:"load_avg_1m"`         // at its end
	Frames   int     `json:"frames"`              // animation frames while the agents worked
	FrameP50 float64 `json:"frame_gap_p50_ms"`    //
	FrameP99 float64 `json:"frame_gap_p99_ms"`    //
	FrameMax float64 `json:"frame_gap_max_ms"`    //
	Long     int     `json:"long_tasks"`          // main-thread tasks over 50 ms
	LongMs   float64 `json:"long_tasks_total_ms"` //
	LongMax  float64 `json:"long_task_max_ms"`    //
	WorkP99  float64 `json:"page_work_p99_ms"`    // one call of the page's own drawing (a frame's rows, the inbox...)
	WorkMax  float64 `json:"page_work_max_ms"`    //
	WorkMs   float64 `json:"page_work_total_ms"`  //
	Updates  int     `json:"row_updates"`         // rows the stream redrew
	WorkSecs float64 `json:"working_s"`           // how long the agents worked
	HeapMB   float64 `json:"js_heap_mb"`          // after it
	EndsMs   float64 `json:"all_ends_shown_ms"`   // every turn ended in the store → every row shows it
}

func main() {
	var c config
	flag.IntVar(&c.agents, "agents", 200, "sessions on the page")
	flag.IntVar(&c.lines, "lines", 30, "run-log lines each agent prints")
	flag.DurationVar(&c.interval, "interval", 500*time.Millisecond, "time between an agent's lines")
	flag.StringVar(&c.fixture, "fixture", "../shared/fixtures/runlogs/claude_ruff-fix_27-tool-calls_success.jsonl", "the run log replayed")
	flag.StringVar(&c.outDir, "out", "bench/results", "where the JSON results go")
	flag.StringVar(&c.readme, "readme", "bench/README.md", "the README whose section is refreshed (empty: none)")
	flag.StringVar(&c.hangar, "hangar", "", "a static hangar binary to run, hangar-envd beside it (empty: build both)")
	flag.Parse()
	c.date = time.Now().UTC().Format("2006-01-02")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		return fmt.Errorf("no chromium here (apt-get install chromium): %w", err)
	}
	fixture, err := filepath.Abs(c.fixture)
	if err != nil {
		return err
	}
	if _, err := os.Stat(fixture); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}
	work, err := os.MkdirTemp("", "hangar-bench-fleet-")
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
	// Every agent's turn follows its run log: room for all of them and the page's stream.
	srv, err := benchkit.Start(ctx, c.hangar, work, fmt.Sprintf("HANGAR_STREAM_MAX_PER_TOKEN=%d", 2*c.agents+16),
		fmt.Sprintf("HANGAR_STREAM_MAX_TOTAL=%d", 2*c.agents+64))
	if err != nil {
		return err
	}
	defer srv.Stop()
	// The browser is on a person's own machine, not the server's: here they share two cores, so
	// the server, and the sandbox daemon and agents it starts (its children), run at nice 10, and
	// 200 working agents do not starve the browser of the CPU its machine would give it.
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, srv.PID(), 10); err != nil {
		return fmt.Errorf("renice hangar: %w", err)
	}
	if err := srv.API(ctx, "POST", "/api/sandboxes", map[string]any{"name": "bench", "provider": "local"}, nil); err != nil {
		return err
	}
	defer srv.API(context.WithoutCancel(ctx), "DELETE", "/api/sandboxes/bench", nil, nil)
	names := make([]string, c.agents)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%03d", i+1)
	}
	fmt.Fprintf(out, "making %d sessions\n", c.agents)
	if err := each(names, func(n string) error {
		return srv.API(ctx, "POST", "/api/sessions", map[string]any{"name": n, "sandbox": "bench", "agent": "command"}, nil)
	}); err != nil {
		return err
	}

	r := &report{Date: c.date, Machine: benchkit.MachineInfo(), Agents: c.agents,
		Target: "smooth with 200 agents: no long task (> 50 ms) and frame gaps p99 ≤ 50 ms while every agent works",
		Method: fmt.Sprintf("headless Chromium (%s, --headless, 1400×900); %d sessions of the command agent in one local sandbox; "+
			"then a turn on each at once printing %d lines of %s, one every %v; frames timed with requestAnimationFrame and long tasks "+
			"with a PerformanceObserver, in the page; hangar and its agents at nice 10 (the browser would have a machine of its own)", exe, c.agents, c.lines, filepath.Base(c.fixture), c.interval)}
	if err := measure(ctx, c, exe, srv, names, fixture, r, out); err != nil {
		return err
	}
	path, err := benchkit.WriteResults(c.outDir, c.date+"-fleet.json", r)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "wrote", path)
	if c.readme == "" {
		return nil
	}
	return writeReadme(c.readme, *r)
}

// each runs fn on every name, 8 at a time, and returns the first error.
func each(names []string, fn func(string) error) error {
	var g errgroup.Group
	g.SetLimit(8)
	for _, n := range names {
		g.Go(func() error {
			if err := fn(n); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// probe is what the page records for the bench: installed before signing in.
const probe = `(() => {
  const b = window.__bench = {signedIn: 0, drawn: 0, frames: [], long: [], work: [], updates: 0, recording: false};
  new PerformanceObserver((l) => { if (b.recording) for (const e of l.getEntries()) b.long.push(e.duration); }).observe({type: "longtask"});
  document.getElementById("token-form").addEventListener("submit", () => { b.signedIn = performance.now(); }, true);
  const rows = document.getElementById("agents");
  new MutationObserver((records) => {
    if (!b.drawn && rows.childElementCount >= %d) b.drawn = performance.now();
    if (b.recording) for (const m of records) if (m.target.tagName === "TR") b.updates++;
  }).observe(rows, {childList: true, subtree: true});
  // The page's own work: its top-level functions are the script's globals, so wrapping them
  // here times every call the stream's events make (a frame's redraw, the inbox, the summary).
  for (const name of ["flush", "snapshot", "inbox", "summary", "remove"]) {
    const fn = window[name];
    window[name] = function (...args) {
      const t0 = performance.now();
      try { return fn.apply(this, args); } finally { if (b.recording) b.work.push(performance.now() - t0); }
    };
  }
  let last = 0;
  const frame = (t) => { if (b.recording && last) b.frames.push(t - last); last = t; requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
  return true;
})()`

type pageResult struct {
	Frames  []float64 `json:"frames"`
	Long    []float64 `json:"long"`
	Work    []float64 `json:"work"`
	Updates int       `json:"updates"`
	Heap    float64   `json:"heap"`
}

func measure(ctx context.Context, c config, exe string, srv *benchkit.Server, names []string, fixture string, r *report, out io.Writer) error {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx); err != nil {
		return fmt.Errorf("start chromium: %w", err)
	}
	wait := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(5*time.Minute))
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/fleet/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	); err != nil {
		return fmt.Errorf("open the page: %w", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](fmt.Sprintf(probe, c.agents))); err != nil {
		return fmt.Errorf("install the probe: %w", err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS("#token"), srv.Token),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
		wait("window.__bench.drawn > 0"),
	); err != nil {
		return fmt.Errorf("sign in and draw %d rows: %w", c.agents, err)
	}
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[float64]("window.__bench.drawn - window.__bench.signedIn"))
	if err != nil {
		return err
	}
	r.Snapshot = drawn
	fmt.Fprintf(out, "%d rows drawn %.0f ms after signing in\n", c.agents, drawn)

	for _, ph := range []struct {
		name     string
		interval time.Duration
		lines    int
	}{{"busy", c.interval, c.lines}, {"steady", 10 * c.interval, max(c.lines/8, 2)}} {
		p := &phase{Name: ph.name, Interval: ph.interval.String()}
		if err := runPhase(ctx, bctx, srv, names, fixture, ph.interval, ph.lines, p, wait); err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		r.Phases = append(r.Phases, p)
		fmt.Fprintf(out, "%s (a line every %v): working %.1f s: %d frames, gap p50 %.1f / p99 %.1f / max %.1f ms; %d long tasks (%.0f ms, max %.0f); "+
			"page's own work p99 %.2f / max %.1f ms (%.0f ms in all); %d row updates; heap %.1f MB; all ends shown %.0f ms after the last; load %.1f\n",
			p.Name, ph.interval, p.WorkSecs, p.Frames, p.FrameP50, p.FrameP99, p.FrameMax, p.Long, p.LongMs, p.LongMax, p.WorkP99, p.WorkMax, p.WorkMs,
			p.Updates, p.HeapMB, p.EndsMs, p.LoadAvg)
	}
	return nil
}

// runPhase starts a turn on every agent at once, each printing lines of fixture one every
// interval, and records what the page did until every row shows its turn ended.
func runPhase(ctx, bctx context.Context, srv *benchkit.Server, names []string, fixture string, interval time.Duration, lines int, p *phase,
	wait func(string) chromedp.Action[chromedp.Void]) error {
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const b = window.__bench;
		b.frames = []; b.long = []; b.work = []; b.updates = 0; b.recording = true; return true; })()`)); err != nil {
		return err
	}
	prompt := fmt.Sprintf("head -n %d %s | while IFS= read -r l; do printf '%%s\\n' \"$l\"; sleep %g; done", lines, fixture, interval.Seconds())
	began := time.Now()
	if err := each(names, func(n string) error {
		return srv.API(ctx, "POST", "/api/sessions/"+n+"/turns", map[string]any{"prompt": prompt}, nil)
	}); err != nil {
		return err
	}
	ended, err := allEnded(ctx, srv, len(names))
	if err != nil {
		return err
	}
	p.WorkSecs = ended.Sub(began).Seconds()
	p.LoadAvg = benchkit.LoadAvg()
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool]("window.__bench.recording = false")); err != nil {
		return err
	}
	if err := chromedp.Do(bctx, wait(fmt.Sprintf(`document.querySelectorAll("#agents tr.state-done").length >= %d`, len(names)))); err != nil {
		return fmt.Errorf("every row done: %w", err)
	}
	p.EndsMs = float64(time.Since(ended).Microseconds()) / 1000
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify({frames: window.__bench.frames, long: window.__bench.long, work: window.__bench.work,
		updates: window.__bench.updates, heap: performance.memory ? performance.memory.usedJSHeapSize / 1048576 : 0})`))
	if err != nil {
		return err
	}
	var pr pageResult
	if err := json.Unmarshal([]byte(raw), &pr); err != nil {
		return err
	}
	p.Frames, p.Updates, p.HeapMB, p.Long = len(pr.Frames), pr.Updates, pr.Heap, len(pr.Long)
	p.FrameP50, p.FrameP99 = benchkit.Percentile(pr.Frames, 50), benchkit.Percentile(pr.Frames, 99)
	for _, f := range pr.Frames {
		p.FrameMax = max(p.FrameMax, f)
	}
	p.WorkP99 = benchkit.Percentile(pr.Work, 99)
	for _, w := range pr.Work {
		p.WorkMs += w
		p.WorkMax = max(p.WorkMax, w)
	}
	for _, l := range pr.Long {
		p.LongMs += l
		p.LongMax = max(p.LongMax, l)
	}
	return nil
}

// allEnded waits until the fleet shows all n agents working (it learns of a new turn with the
// turn's first event), then none, and says when it saw that.
func allEnded(ctx context.Context, srv *benchkit.Server, n int) (time.Time, error) {
	if err := fleetUntil(ctx, srv, func(agents, ended int) bool { return agents == n && ended == 0 }); err != nil {
		return time.Time{}, err
	}
	if err := fleetUntil(ctx, srv, func(agents, ended int) bool { return agents == n && ended == n }); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// fleetUntil reads the fleet's summary every 100 ms until ok says yes of its agents and of
// those whose turn ended.
func fleetUntil(ctx context.Context, srv *benchkit.Server, ok func(agents, ended int) bool) error {
	for {
		var f struct {
			Summary struct {
				Agents  int            `json:"agents"`
				ByState map[string]int `json:"by_state"`
			} `json:"summary"`
		}
		if err := srv.API(ctx, "GET", "/api/fleet", nil, &f); err != nil {
			return err
		}
		if ok(f.Summary.Agents, f.Summary.ByState["done"]+f.Summary.ByState["failed"]) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const (
	beginMarker = "<!-- fleet:begin (written by scripts/bench/fleet) -->"
	endMarker   = "<!-- fleet:end -->"
)

func writeReadme(path string, r report) error {
	var b strings.Builder
	b.WriteString("\n## The Fleet page with many agents\n\n")
	fmt.Fprintf(&b, "The Fleet page in headless Chromium (`scripts/bench/fleet`) with %d sessions, then a turn on each at\n", r.Agents)
	b.WriteString("once replaying a real run log: first *busy* (every agent a line every 500 ms, so the stream\n")
	b.WriteString("sends each agent's change every 2 s: a hundred rows a second), then *steady* (a line every 5 s).\n")
	b.WriteString("Target: smooth — no long task (the main thread busy over 50 ms) and frame gaps p99 ≤ 50 ms.\n")
	b.WriteString("The browser shares the machine's two cores with hangar and the agents' processes, so hangar\n")
	b.WriteString("(and with it the sandbox's daemon and agents) runs at nice 10; the page's own drawing is timed\n")
	b.WriteString("apart from whatever else runs.\n\n")
	fmt.Fprintf(&b, "%s, %d cores, hangar %s; signing in → %d rows drawn: %.0f ms.\n\n", r.Date, r.Machine.Cores, r.Machine.HangarCommit, r.Agents, r.Snapshot)
	b.WriteString("| Phase | Load | Frame gaps p50 / p99 (max) | Long tasks | Page's own drawing per call p99 (max), in all | Rows redrawn | Every end shown after |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s (a line every %s, %.0f s) | %.1f | %.1f / %.1f ms (%.0f) | %d (%.0f ms, longest %.0f) | %.1f ms (%.1f), %.0f ms | %d | %.0f ms |\n",
			p.Name, p.Interval, p.WorkSecs, p.LoadAvg, p.FrameP50, p.FrameP99, p.FrameMax, p.Long, p.LongMs, p.LongMax, p.WorkP99, p.WorkMax, p.WorkMs,
			p.Updates, p.EndsMs)
	}
	return benchkit.WriteSection(path, beginMarker, endMarker, b.String())
}
