package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// report is one provider's results file.
type report struct {
	Date     string                 `json:"date"`
	Provider string                 `json:"provider"`
	Machine  benchkit.Machine       `json:"machine"`
	Method   string                 `json:"method"`
	Fixture  string                 `json:"fixture"`
	Modes    map[string]*modeResult `json:"modes"`
	Targets  map[string]string      `json:"targets"`
	Notes    []string               `json:"notes,omitempty"`
}

// modeResult is one mode's figures over its runs. Delay is from the agent printing a line to
// the SSE reader having its event; recorded is from the print to the event's ts (when hangar
// recorded it: millisecond resolution), the rest of the delay being the feed and the SSE hop.
type modeResult struct {
	Runs          int       `json:"runs"`
	LinesPerRun   int       `json:"lines_per_run"`
	Received      int       `json:"received"`
	Missing       int       `json:"missing"`
	Duplicates    int       `json:"duplicates"`
	DelayP50Ms    float64   `json:"delay_p50_ms"`
	DelayP95Ms    float64   `json:"delay_p95_ms"`
	DelayP99Ms    float64   `json:"delay_p99_ms"`
	DelayMaxMs    float64   `json:"delay_max_ms"`
	RecordedP50Ms float64   `json:"recorded_p50_ms"`
	RecordedP95Ms float64   `json:"recorded_p95_ms"`
	LoadAvg       []float64 `json:"load_avg_1m"` // at the start of each run: the machine is shared
	Error         string    `json:"error,omitempty"`
}

var targets = map[string]string{
	"following_docker": "<= 5 ms p50 and <= 10 ms p95 from the line printed to its event at an SSE reader, in a Docker container",
	"seed_following":   "spec: 15 / 22 ms (tail -F through the daemon)",
	"seed_polling":     "spec: 4,727 / 4,936 ms (session_poll_seconds 5)",
}

// mode is one way of running hangar and reading a turn's events: an SSE reader, or an MCP
// subscriber (resources/subscribe to hangar://sessions/<name>/events, then reading ?since=).
type mode struct {
	name  string
	env   []string // hangar's extra settings
	runs  int
	lines int
	// read follows the session's events after since until the turn's turn.finished, calling
	// got for each with the time the client had it.
	read func(ctx context.Context, srv *benchkit.Server, session string, since int64, started chan<- struct{}, got func(ev event, at time.Time)) error
}

// event is what the bench reads of an event.
type event struct {
	Seq  int64           `json:"seq"`
	Turn string          `json:"turn"`
	TS   time.Time       `json:"ts"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func modes(c config) []mode {
	ms := []mode{{name: "sse_following", runs: c.runs, lines: c.lines, read: readSSE}}
	if c.pollRuns > 0 {
		ms = append(ms, mode{name: "sse_polling", runs: c.pollRuns, lines: c.pollLines, read: readSSE,
			env: []string{"HANGAR_STREAM_TURN_LOGS=false", fmt.Sprintf("HANGAR_SESSION_POLL_SECONDS=%d", c.pollSeconds)}})
	}
	ms = append(ms, mode{name: "mcp_following", runs: c.runs, lines: c.lines, read: readMCP})
	return ms
}

func runAll(ctx context.Context, c config, out io.Writer) error {
	fixture, err := os.ReadFile(c.fixture)
	if err != nil {
		return fmt.Errorf("read the fixture log: %w", err)
	}
	if n := strings.Count(string(fixture), "\n"); c.lines > n || c.pollLines > n {
		return fmt.Errorf("the fixture has %d lines: -lines and -poll-lines must be at most that", n)
	}
	work, err := os.MkdirTemp("", "hangar-bench-turns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if c.hangar == "" {
		fmt.Fprintln(out, "building hangar")
		if c.hangar, err = benchkit.Build(ctx, work); err != nil {
			return err
		}
	}
	var wrote bool
	for _, p := range c.providers {
		r, err := runProvider(ctx, c, p, work, fixture, out)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if r == nil {
			continue
		}
		path, err := benchkit.WriteResults(c.outDir, c.date+"-turns-"+p+".json", r)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "wrote", path)
		wrote = true
	}
	if c.readme != "" && wrote {
		all, err := latestReports(c.outDir)
		if err != nil {
			return err
		}
		return writeReadme(c.readme, all)
	}
	return nil
}

func runProvider(ctx context.Context, c config, provider, work string, fixture []byte, out io.Writer) (*report, error) {
	r := &report{Date: c.date, Provider: provider, Machine: benchkit.MachineInfo(), Modes: map[string]*modeResult{}, Targets: targets,
		Fixture: filepath.Base(c.fixture),
		Method: fmt.Sprintf("the command agent replays the fixture log a line every %v, each line stamped (bash $EPOCHREALTIME, added as bench_ts) as it is printed; "+
			"a reader of GET /api/sessions/{ref}/events/stream opened before the turn takes each event's delay from the stamp", c.interval)}
	create := map[string]any{"provider": provider}
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
	for _, m := range modes(c) {
		res, err := runMode(ctx, c, m, provider, create, filepath.Join(work, provider+"-"+m.name), fixture)
		if err != nil {
			res = &modeResult{Error: err.Error()}
		}
		r.Modes[m.name] = res
		fmt.Fprintf(out, "%-7s %-14s %d runs × %d lines: delay %.2f / %.2f / %.2f ms (p50/p95/p99), max %.2f, recorded %.0f / %.0f ms, %d missing, %d duplicated, load %v %s\n",
			provider, m.name, res.Runs, res.LinesPerRun, res.DelayP50Ms, res.DelayP95Ms, res.DelayP99Ms, res.DelayMaxMs,
			res.RecordedP50Ms, res.RecordedP95Ms, res.Missing, res.Duplicates, res.LoadAvg, res.Error)
	}
	r.Notes = append(r.Notes, "mcp_following: an MCP subscriber (go-sdk, 2025-11-25) to hangar://sessions/<name>/events, reading ?since= at each update; updates are sent at once, then at most every 250 ms per subscription, which most of its delay is")
	return r, nil
}

// runMode starts a hangar with the mode's settings, a sandbox and a session in it, and
// measures the mode's runs.
func runMode(ctx context.Context, c config, m mode, provider string, create map[string]any, dir string, fixture []byte) (*modeResult, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	srv, err := benchkit.Start(ctx, c.hangar, dir, m.env...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	sb := map[string]any{"name": "bench"}
	for k, v := range create {
		sb[k] = v
	}
	if err := srv.API(ctx, "POST", "/api/sandboxes", sb, nil); err != nil {
		return nil, err
	}
	defer srv.API(context.WithoutCancel(ctx), "DELETE", "/api/sandboxes/bench", nil, nil)
	log, err := upload(ctx, srv, provider, dir, fixture)
	if err != nil {
		return nil, err
	}
	if err := srv.API(ctx, "POST", "/api/sessions", map[string]any{"name": "bench", "sandbox": "bench", "agent": "command"}, nil); err != nil {
		return nil, err
	}
	res := &modeResult{Runs: m.runs, LinesPerRun: m.lines}
	var delays, recorded []float64
	var since int64
	for run := 0; run < m.runs; run++ {
		res.LoadAvg = append(res.LoadAvg, benchkit.LoadAvg())
		samples, last, err := measure(ctx, c, m, srv, log, since)
		if err != nil {
			return res, err
		}
		since = last
		seen := map[int]bool{}
		for _, s := range samples {
			if seen[s.i] {
				res.Duplicates++
			}
			seen[s.i] = true
			delays = append(delays, s.delay)
			recorded = append(recorded, s.recordedMs)
		}
		res.Received += len(samples)
		res.Missing += m.lines - len(seen)
	}
	res.DelayP50Ms, res.DelayP95Ms, res.DelayP99Ms = benchkit.Percentile(delays, 50), benchkit.Percentile(delays, 95), benchkit.Percentile(delays, 99)
	res.DelayMaxMs = benchkit.Percentile(delays, 100)
	res.RecordedP50Ms, res.RecordedP95Ms = benchkit.Percentile(recorded, 50), benchkit.Percentile(recorded, 95)
	return res, nil
}

// upload puts the fixture log in the sandbox and returns its path there: on the local
// provider a file on this machine; in a container, written through exec in base64 chunks (the
// request body and a command line are bounded).
func upload(ctx context.Context, srv *benchkit.Server, provider, dir string, fixture []byte) (string, error) {
	if provider == "local" {
		path := filepath.Join(dir, "fixture.jsonl")
		return path, os.WriteFile(path, fixture, 0o644)
	}
	const path = "/tmp/bench-fixture.jsonl"
	b64 := base64.StdEncoding.EncodeToString(fixture)
	if err := srv.API(ctx, "POST", "/api/sandboxes/bench/exec", map[string]any{"command": "rm -f " + path + ".b64"}, nil); err != nil {
		return "", err
	}
	for len(b64) > 0 {
		n := min(len(b64), 48<<10)
		cmd := fmt.Sprintf("printf %%s '%s' >> %s.b64", b64[:n], path)
		if err := srv.API(ctx, "POST", "/api/sandboxes/bench/exec", map[string]any{"command": cmd}, nil); err != nil {
			return "", err
		}
		b64 = b64[n:]
	}
	var res struct {
		ExitCode int `json:"exit_code"`
	}
	cmd := fmt.Sprintf("base64 -d %[1]s.b64 > %[1]s", path)
	if err := srv.API(ctx, "POST", "/api/sandboxes/bench/exec", map[string]any{"command": cmd}, &res); err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("decode the fixture in the sandbox: exit %d, %v", res.ExitCode, err)
	}
	return path, nil
}

// replayPrompt is the command agent's prompt: the first n lines of log, one every interval,
// each JSON object given bench_i (its number) and bench_ts (when it was printed) first. No
// process per line: the wait is a read with a timeout on a pipe nobody writes.
func replayPrompt(log string, n int, interval time.Duration) string {
	return fmt.Sprintf(`exec 9<> <(:); i=0; while [ $i -lt %d ] && IFS= read -r l; do i=$((i+1)); read -t %.3f -u 9; printf '{"bench_i":%%d,"bench_ts":%%s,%%s\n' $i "$EPOCHREALTIME" "${l#\{}"; done < '%s'`,
		n, interval.Seconds(), log)
}

// sample is one stamped line as the client had it.
type sample struct {
	i                 int     // its bench_i
	delay, recordedMs float64 // from its print to the client having it, and to its event's ts
}

// measure runs one turn and reads its events with the mode's reader until its turn.finished:
// the stamped lines, and the last seq read.
func measure(ctx context.Context, c config, m mode, srv *benchkit.Server, log string, since int64) ([]sample, int64, error) {
	timeout := time.Duration(m.lines)*c.interval + time.Duration(c.pollSeconds)*time.Second + time.Minute
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var samples []sample
	last := since
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- m.read(rctx, srv, "bench", since, started, func(ev event, at time.Time) {
			last = max(last, ev.Seq)
			var stamp struct {
				I  int     `json:"bench_i"`
				TS float64 `json:"bench_ts"`
			}
			if json.Unmarshal(ev.Data, &stamp) != nil || stamp.I == 0 {
				return
			}
			printed := time.UnixMicro(int64(math.Round(stamp.TS * 1e6)))
			samples = append(samples, sample{i: stamp.I, delay: float64(at.Sub(printed).Microseconds()) / 1000,
				recordedMs: float64(ev.TS.Sub(printed).Microseconds()) / 1000})
		})
	}()
	select {
	case <-started:
	case err := <-done:
		return nil, 0, fmt.Errorf("open the event stream: %w", err)
	}
	if err := srv.API(ctx, "POST", "/api/sessions/bench/turns", map[string]any{"prompt": replayPrompt(log, m.lines, c.interval)}, nil); err != nil {
		cancel()
		<-done
		return nil, 0, err
	}
	if err := <-done; err != nil {
		return nil, 0, err
	}
	return samples, last, nil
}

// readSSE reads GET /api/sessions/{session}/events/stream?since= until a turn.finished.
func readSSE(ctx context.Context, srv *benchkit.Server, session string, since int64, started chan<- struct{}, got func(ev event, at time.Time)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/sessions/%s/events/stream?since=%d", srv.URL, session, since), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	resp, err := srv.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET events/stream: %d %s", resp.StatusCode, b)
	}
	close(started)
	errFinished := fmt.Errorf("finished")
	err = benchkit.SSEEvents(resp.Body, func(_ string, data []byte) error {
		at := time.Now()
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("decode an event: %w", err)
		}
		got(ev, at)
		if ev.Type == "turn.finished" {
			return errFinished
		}
		return nil
	})
	if err == errFinished {
		return nil
	}
	if err == nil {
		return fmt.Errorf("the event stream ended before turn.finished")
	}
	return err
}
