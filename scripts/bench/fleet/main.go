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
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"

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
	LoadAvg  float64          `json:"load_avg_1m"`
	Target   string           `json:"target"`
	Snapshot float64          `json:"snapshot_drawn_ms"`   // signing in → all rows drawn
	Frames   int              `json:"frames"`              // animation frames while the agents worked
	FrameP50 float64          `json:"frame_gap_p50_ms"`    //
	FrameP99 float64          `json:"frame_gap_p99_ms"`    //
	FrameMax float64          `json:"frame_gap_max_ms"`    //
	Long     int              `json:"long_tasks"`          // main-thread tasks over 50 ms
	LongMs   float64          `json:"long_tasks_total_ms"` //
	LongMax  float64          `json:"long_task_max_ms"`    //
	Updates  int              `json:"row_updates"`         // rows the stream redrew
	WorkSecs float64          `json:"working_s"`           // how long the agents worked
	HeapMB   float64          `json:"js_heap_mb"`          // after the run
	EndsMs   float64          `json:"all_ends_shown_ms"`   // every turn ended in the store → every row shows it
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
			"with a PerformanceObserver, in the page", exe, c.agents, c.lines, filepath.Base(c.fixture), c.interval)}
	if err := measure(ctx, c, exe, srv, names, fixture, r, out); err != nil {
		return err
	}
	r.LoadAvg = benchkit.LoadAvg()
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
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, 8)
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(n); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", n, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// probe is what the page records for the bench: installed before signing in.
const probe = `(() => {
  const b = window.__bench = {signedIn: 0, drawn: 0, frames: [], long: [], updates: 0, recording: false};
  new PerformanceObserver((l) => { if (b.recording) for (const e of l.getEntries()) b.long.push(e.duration); }).observe({type: "longtask"});
  document.getElementById("token-form").addEventListener("submit", () => { b.signedIn = performance.now(); }, true);
  const rows = document.getElementById("agents");
  new MutationObserver((records) => {
    if (!b.drawn && rows.childElementCount >= %d) b.drawn = performance.now();
    if (b.recording) for (const m of records) if (m.target.tagName === "TR") b.updates++;
  }).observe(rows, {childList: true, subtree: true});
  let last = 0;
  const frame = (t) => { if (b.recording && last) b.frames.push(t - last); last = t; requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
  return true;
})()`

type pageResult struct {
	Frames  []float64 `json:"frames"`
	Long    []float64 `json:"long"`
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

	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool]("window.__bench.recording = true")); err != nil {
		return err
	}
	prompt := fmt.Sprintf("head -n %d %s | while IFS= read -r l; do printf '%%s\\n' \"$l\"; sleep %g; done", c.lines, fixture, c.interval.Seconds())
	began := time.Now()
	fmt.Fprintf(out, "starting %d turns\n", len(names))
	if err := each(names, func(n string) error {
		return srv.API(ctx, "POST", "/api/sessions/"+n+"/turns", map[string]any{"prompt": prompt}, nil)
	}); err != nil {
		return err
	}
	ended, err := allEnded(ctx, srv, len(names))
	if err != nil {
		return err
	}
	r.WorkSecs = ended.Sub(began).Seconds()
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool]("window.__bench.recording = false")); err != nil {
		return err
	}
	if err := chromedp.Do(bctx, wait(fmt.Sprintf(`document.querySelectorAll("#agents tr.state-done").length >= %d`, c.agents))); err != nil {
		return fmt.Errorf("every row done: %w", err)
	}
	r.EndsMs = float64(time.Since(ended).Microseconds()) / 1000
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify({frames: window.__bench.frames, long: window.__bench.long,
		updates: window.__bench.updates, heap: performance.memory ? performance.memory.usedJSHeapSize / 1048576 : 0})`))
	if err != nil {
		return err
	}
	var p pageResult
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return err
	}
	r.Frames, r.Updates, r.HeapMB, r.Long = len(p.Frames), p.Updates, p.Heap, len(p.Long)
	r.FrameP50, r.FrameP99 = benchkit.Percentile(p.Frames, 50), benchkit.Percentile(p.Frames, 99)
	for _, f := range p.Frames {
		r.FrameMax = max(r.FrameMax, f)
	}
	for _, l := range p.Long {
		r.LongMs += l
		r.LongMax = max(r.LongMax, l)
	}
	fmt.Fprintf(out, "working %.1f s: %d frames, gap p50 %.1f / p99 %.1f / max %.1f ms; %d long tasks (%.0f ms, max %.0f); %d row updates; heap %.1f MB; all ends shown %.0f ms after the last\n",
		r.WorkSecs, r.Frames, r.FrameP50, r.FrameP99, r.FrameMax, r.Long, r.LongMs, r.LongMax, r.Updates, r.HeapMB, r.EndsMs)
	return nil
}

// allEnded waits until the fleet has n agents and none working, and says when it saw that.
func allEnded(ctx context.Context, srv *benchkit.Server, n int) (time.Time, error) {
	for {
		var f struct {
			Summary struct {
				Agents  int            `json:"agents"`
				ByState map[string]int `json:"by_state"`
			} `json:"summary"`
		}
		if err := srv.API(ctx, "GET", "/api/fleet", nil, &f); err != nil {
			return time.Time{}, err
		}
		if f.Summary.Agents == n && f.Summary.ByState["done"]+f.Summary.ByState["failed"] == n {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
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
	b.WriteString("The Fleet page in headless Chromium (`scripts/bench/fleet`) with " + fmt.Sprint(r.Agents) + " sessions, then a turn on each at\n")
	b.WriteString("once replaying a real run log, every agent printing a line every 500 ms: the stream sends each\n")
	b.WriteString("agent's change at most every 2 s, so the page redraws about a hundred rows a second. Target:\n")
	b.WriteString("smooth — no long task (the main thread busy over 50 ms) and frame gaps p99 ≤ 50 ms while every\n")
	b.WriteString("agent works.\n\n")
	fmt.Fprintf(&b, "%s, %d cores, hangar %s, load %.1f:\n\n", r.Date, r.Machine.Cores, r.Machine.HangarCommit, r.LoadAvg)
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| signing in → %d rows drawn | %.0f ms |\n", r.Agents, r.Snapshot)
	fmt.Fprintf(&b, "| while working (%.0f s) | %d frames, gaps p50 %.1f / p99 %.1f ms, max %.1f ms |\n", r.WorkSecs, r.Frames, r.FrameP50, r.FrameP99, r.FrameMax)
	fmt.Fprintf(&b, "| long tasks | %d (%.0f ms in all, longest %.0f ms) |\n", r.Long, r.LongMs, r.LongMax)
	fmt.Fprintf(&b, "| rows redrawn | %d |\n", r.Updates)
	fmt.Fprintf(&b, "| every turn ended → every row shows it | %.0f ms (the 1 s poll and 2 s coalescing) |\n", r.EndsMs)
	fmt.Fprintf(&b, "| page's JS heap after | %.1f MB |\n", r.HeapMB)
	return benchkit.WriteSection(path, beginMarker, endMarker, b.String())
}
