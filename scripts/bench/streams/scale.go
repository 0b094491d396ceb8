package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// The scale mode (issue 31): N concurrent REST streams at one line a second, N stepped up
// (-scale-step 1024,2048,4096,8192) until a target breaks, each step beside the same load read
// from the daemon directly; then N background processes across a few sandboxes, each attached
// (-background 10000). It writes bench/results/<date>-scale.json (-scale-h2c: <date>-scale-h2c.json),
// saying where it broke and why.

// Targets of a step.
const (
	scaleP99Ms               = 20.0
	scaleRSSBytes            = 512 << 20
	scaleGoroutinesPerStream = 2.0
)

// scaleReport is the results file.
type scaleReport struct {
	Date       string            `json:"date"`
	Provider   string            `json:"provider"`
	Machine    machine           `json:"machine"`
	Load       load              `json:"load"`
	Method     string            `json:"method"`
	Protocol   string            `json:"protocol"` // the client's to hangar: HTTP/1.1 or h2c
	Targets    map[string]string `json:"targets"`
	Steps      []scaleStep       `json:"steps"`
	BrokeAt    int               `json:"broke_at,omitempty"` // the first N that missed a target; 0: none did
	Why        []string          `json:"why,omitempty"`
	Background *backgroundResult `json:"background,omitempty"`
	Notes      []string          `json:"notes,omitempty"`
}

// scaleStep is one N: through hangar, and the same load from the daemon directly.
type scaleStep struct {
	Streams int         `json:"streams"`
	Hangar  scaleResult `json:"hangar"`
	Daemon  scaleResult `json:"daemon"`
	// BaseGoroutines is hangar's goroutines before the step; GoroutinesPerStream is the most
	// more than that while the streams were open, per stream (at one line a second a stream is
	// at rest most of the time).
	BaseGoroutines      int      `json:"base_goroutines"`
	GoroutinesPerStream float64  `json:"goroutines_per_stream"`
	Missed              []string `json:"missed,omitempty"`
}

// backgroundResult is the background-processes mode.
type backgroundResult struct {
	Processes      int     `json:"processes"`
	Sandboxes      int     `json:"sandboxes"`
	Started        int     `json:"started"`
	StartErrors    int     `json:"start_errors"`
	Attached       int     `json:"attached"`
	AttachErrors   int     `json:"attach_errors"`
	FirstError     string  `json:"first_error,omitempty"`
	StartSeconds   float64 `json:"start_seconds"`
	AttachSeconds  float64 `json:"attach_seconds"`
	HangarRSSBytes int64   `json:"hangar_rss_bytes"`
	HangarFDs      int     `json:"hangar_fds"`
	HangarDBFDs    int     `json:"hangar_db_fds"`
	Goroutines     int     `json:"hangar_goroutines"`
	// DaemonFDs is each sandbox daemon's open descriptors with every process running and
	// attached; DaemonFDsPerProcess their sum over the processes.
	DaemonFDs           []int   `json:"daemon_fds,omitempty"`
	DaemonFDsPerProcess float64 `json:"daemon_fds_per_process,omitempty"`
}

// runScale is the scale mode on the local provider.
func runScale(ctx context.Context, c config, work string, out io.Writer) error {
	r := &scaleReport{Date: c.date, Provider: "local", Machine: machineInfo(), Load: load{Before: loadAvg()},
		Method: fmt.Sprintf("N concurrent REST exec/stream SSE streams, each a shell printing a stamped line every second for %d s (bash $EPOCHREALTIME, no fork per line), then the same N read from the sandbox's daemon directly by one client; hangar's RSS, goroutines (uncompressed /metrics) and descriptors sampled once a second", c.scaleSeconds),
		Targets: map[string]string{
			"p99":        fmt.Sprintf("per-line p99 <= %.0f ms (beside the same load from the daemon directly)", scaleP99Ms),
			"rss":        "hangar's RSS <= 512 MiB",
			"goroutines": "<= 2 goroutines per open stream",
			"errors":     "0 streams failed, 0 lines missing",
			"background": "10,000 background processes running across a few sandboxes, each attachable, 0 errors",
		}}
	dir := filepath.Join(work, "scale")
	os.MkdirAll(dir, 0o700)
	srv, err := startServer(ctx, c.hangar, dir, "HANGAR_STREAM_MAX_PER_TOKEN=100000", "HANGAR_STREAM_MAX_PER_USER=1000000",
		"HANGAR_STREAM_MAX_TOTAL=1000000", "HANGAR_BACKGROUND_MAX_PER_TOKEN=10000", "HANGAR_BACKGROUND_MAX_PER_USER=100000")
	if err != nil {
		return err
	}
	defer srv.stop()
	defer func() { r.Load.After = loadAvg() }()
	r.Protocol = "HTTP/1.1"
	if c.scaleH2C {
		r.Protocol = "h2c"
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		srv.http = &http.Client{Transport: &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 1024}}
		srv.Server.HTTP = srv.http
	}
	fmt.Fprintf(out, "scale: load before %v on %d CPUs\n", r.Load.Before, r.Machine.Cores)
	if len(c.scaleSteps) > 0 {
		b := &bench{srv: srv, sandbox: "scale"}
		if err := srv.api(ctx, "POST", "/api/sandboxes", map[string]any{"name": "scale", "provider": "local"}, nil); err != nil {
			return err
		}
		for _, n := range c.scaleSteps {
			if ctx.Err() != nil {
				break
			}
			st := scaleStep{Streams: n, BaseGoroutines: b.goroutines(ctx)}
			st.Hangar = b.scale(ctx, n, c.scaleSeconds, time.Second, false)
			st.Daemon = b.scale(ctx, n, c.scaleSeconds, time.Second, true)
			st.GoroutinesPerStream = float64(st.Hangar.MaxGoroutines-st.BaseGoroutines) / float64(n)
			st.Missed = missed(st)
			r.Steps = append(r.Steps, st)
			fmt.Fprintf(out, "scale %5d streams: per line %.2f / %.2f / %.2f ms (daemon directly %.2f / %.2f / %.2f), RSS %.1f MiB, %.2f goroutines a stream, %d fds (%d on hangar.db), %d missing, %d failed %s; missed: %v\n",
				n, st.Hangar.DelayP50Ms, st.Hangar.DelayP95Ms, st.Hangar.DelayP99Ms, st.Daemon.DelayP50Ms, st.Daemon.DelayP95Ms, st.Daemon.DelayP99Ms,
				float64(st.Hangar.MaxRSSBytes)/(1<<20), st.GoroutinesPerStream, st.Hangar.MaxFDs, st.Hangar.MaxDBFDs, st.Hangar.Missing, st.Hangar.Failed, st.Hangar.FirstError, st.Missed)
			// Goroutines a stream do not grow with N, and a tail the daemon's own streams have
			// too is the machine's: those are told at every step, and the steps go on until
			// hangar's delay, memory or errors break.
			if slices.ContainsFunc(st.Missed, func(m string) bool {
				return !strings.Contains(m, "goroutines a stream") && !strings.HasPrefix(m, "machine:")
			}) {
				r.BrokeAt, r.Why = n, st.Missed
				break
			}
		}
		srv.api(context.WithoutCancel(ctx), "DELETE", "/api/sandboxes/scale", nil, nil)
	}
	if c.background > 0 {
		bg := background(ctx, srv, c.background, c.backgroundSandboxes, out)
		r.Background = &bg
	}
	r.Load.After = loadAvg()
	name := c.date + "-scale.json"
	if c.scaleH2C {
		name = c.date + "-scale-h2c.json"
	}
	path, err := benchkit.WriteResults(c.outDir, name, r)
	fmt.Fprintln(out, "scale: wrote", path)
	return err
}

// missed names the targets step st missed.
func missed(st scaleStep) []string {
	var m []string
	h := st.Hangar
	if h.Failed > 0 || h.Missing > 0 {
		m = append(m, fmt.Sprintf("errors: %d streams failed, %d lines missing (%s)", h.Failed, h.Missing, h.FirstError))
	}
	switch {
	case h.DelayP99Ms <= scaleP99Ms:
	case st.Daemon.DelayP99Ms > scaleP99Ms:
		// The same load read from the daemon directly missed it too: the machine's tail, which
		// no relay can be below, so the step is told but does not end the steps.
		m = append(m, fmt.Sprintf("machine: p99 %.1f ms > %.0f ms, and %.1f ms from the daemon directly", h.DelayP99Ms, scaleP99Ms, st.Daemon.DelayP99Ms))
	default:
		m = append(m, fmt.Sprintf("p99 %.1f ms > %.0f ms (the daemon directly: %.1f ms)", h.DelayP99Ms, scaleP99Ms, st.Daemon.DelayP99Ms))
	}
	if h.MaxRSSBytes > scaleRSSBytes {
		m = append(m, fmt.Sprintf("RSS %.0f MiB > 512 MiB", float64(h.MaxRSSBytes)/(1<<20)))
	}
	if st.GoroutinesPerStream > scaleGoroutinesPerStream {
		m = append(m, fmt.Sprintf("%.2f goroutines a stream > %.0f", st.GoroutinesPerStream, scaleGoroutinesPerStream))
	}
	return m
}

// background starts n background processes spread over k sandboxes, each printing a line and
// then sleeping, attaches to every one (an SSE stream each, held open until all are attached)
// and reads its line.
func background(ctx context.Context, srv *server, n, k int, out io.Writer) backgroundResult {
	res := backgroundResult{Processes: n, Sandboxes: k}
	var firstErr sync.Once
	fail := func(err error) { firstErr.Do(func() { res.FirstError = err.Error() }) }
	for i := range k {
		if err := srv.api(ctx, "POST", "/api/sandboxes", map[string]any{"name": fmt.Sprintf("bg%d", i), "provider": "local"}, nil); err != nil {
			res.FirstError = err.Error()
			return res
		}
	}
	defer func() {
		for i := range k {
			srv.api(context.WithoutCancel(ctx), "DELETE", fmt.Sprintf("/api/sandboxes/bg%d", i), nil, nil)
		}
	}()
	type proc struct{ sandbox, id string }
	procs := make([]proc, n)
	var started, startErrs atomic.Int64
	start := time.Now()
	parallel(n, 32, func(i int) {
		sb := fmt.Sprintf("bg%d", i%k)
		var p struct {
			ID string `json:"process_id"`
		}
		if err := srv.api(ctx, "POST", "/api/sandboxes/"+sb+"/processes", map[string]any{"command": "echo started; exec sleep 3600"}, &p); err != nil {
			startErrs.Add(1)
			fail(fmt.Errorf("start: %w", err))
			return
		}
		procs[i] = proc{sb, p.ID}
		if m := started.Add(1); m%1000 == 0 {
			fmt.Fprintf(out, "background: %d started\n", m)
		}
	})
	res.StartSeconds = time.Since(start).Seconds()
	res.Started, res.StartErrors = int(started.Load()), int(startErrs.Load())

	var attached, attachErrs atomic.Int64
	var open sync.WaitGroup // every attach stays open until all are made
	release := make(chan struct{})
	start = time.Now()
	parallel(n, 64, func(i int) {
		p := procs[i]
		if p.id == "" {
			return
		}
		body, err := attachOne(ctx, srv, p.sandbox, p.id)
		if err != nil {
			attachErrs.Add(1)
			fail(fmt.Errorf("attach %s/%s: %w", p.sandbox, p.id, err))
			return
		}
		attached.Add(1)
		open.Go(func() {
			<-release
			body.Close()
		})
	})
	res.AttachSeconds = time.Since(start).Seconds()
	res.Attached, res.AttachErrors = int(attached.Load()), int(attachErrs.Load())
	res.HangarRSSBytes = srv.rss()
	res.HangarFDs, res.HangarDBFDs = openFiles(srv.PID())
	b := &bench{srv: srv}
	res.Goroutines = b.goroutines(ctx)
	sum := 0
	for _, pid := range daemonsOf(srv.dataDir) {
		fds, _ := openFiles(pid)
		res.DaemonFDs = append(res.DaemonFDs, fds)
		sum += fds
	}
	if res.Started > 0 {
		res.DaemonFDsPerProcess = float64(sum) / float64(res.Started)
	}
	close(release)
	open.Wait()
	fmt.Fprintf(out, "background: %d processes in %d sandboxes: %d started (%d errors) in %.0f s, %d attached (%d errors) in %.0f s; hangar %.0f MiB, %d goroutines, %d fds (%d on hangar.db); daemons' fds %v (%.2f a process) %s\n",
		n, k, res.Started, res.StartErrors, res.StartSeconds, res.Attached, res.AttachErrors, res.AttachSeconds, float64(res.HangarRSSBytes)/(1<<20),
		res.Goroutines, res.HangarFDs, res.HangarDBFDs, res.DaemonFDs, res.DaemonFDsPerProcess, res.FirstError)
	return res
}

// attachOne opens a process's SSE stream and reads until its first output, "started"; the
// caller closes the body.
func attachOne(ctx context.Context, srv *server, sandbox, id string) (io.ReadCloser, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.url+"/api/sandboxes/"+sandbox+"/processes/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+srv.token)
	resp, err := srv.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%d %s", resp.StatusCode, raw)
	}
	errGot := fmt.Errorf("got it")
	err = benchkit.SSEEvents(resp.Body, func(name string, data []byte) error {
		switch name {
		case "output":
			var ev struct{ Data string }
			if json.Unmarshal(data, &ev) == nil && strings.Contains(ev.Data, "started") {
				return errGot
			}
		case "end":
			return fmt.Errorf("the process ended: %s", data)
		}
		return nil
	})
	if err != errGot {
		resp.Body.Close()
		if err == nil {
			err = fmt.Errorf("the stream ended before the process's first line")
		}
		return nil, err
	}
	return resp.Body, nil
}

// parallel calls fn(0..n-1) on at most width goroutines.
func parallel(n, width int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(width, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// openFiles counts process pid's open descriptors, in all and on hangar's SQLite files.
func openFiles(pid int) (all, db int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		all++
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.Contains(filepath.Base(t), "hangar.db") {
			db++
		}
	}
	return all, db
}

// daemonsOf lists the pids of the local sandboxes' daemons of the hangar whose data directory
// is dataDir: they run in a session of their own, not as its children, with a --workdir in it.
func daemonsOf(dataDir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "envd" && strings.Contains(string(b), dataDir) {
			out = append(out, pid)
		}
	}
	return out
}
