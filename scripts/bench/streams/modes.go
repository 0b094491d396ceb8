package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// bench is one provider's bench: a server, a sandbox in it, and an MCP session.
type bench struct {
	srv       *server
	sandbox   string
	container string // docker: the sandbox's container id
	session   *mcp.ClientSession

	progress sync.Map // progress token -> *progressLines
	nextTok  atomic.Int64
	want     int // lines a run prints

	relay *benchkit.Relay // the relay_floor mode's relay, once started
}

func (b *bench) connectMCP(ctx context.Context) error {
	cl := mcp.NewClient(&mcp.Implementation{Name: "hangar-bench", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			at := time.Now()
			if pl, ok := b.progress.Load(req.Params.ProgressToken); ok {
				pl.(*progressLines).feed(req.Params.Message, req.Params.Progress, at)
			}
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: b.srv.url + "/mcp", HTTPClient: &http.Client{Transport: benchkit.Bearer{Token: b.srv.token, Next: http.DefaultTransport}}, MaxRetries: -1}
	s, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		return fmt.Errorf("connect MCP: %w", err)
	}
	b.session = s
	return nil
}

// call calls a tool without asking for progress.
func (b *bench) call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	return b.callWithToken(ctx, tool, args, "")
}

// watchProgress registers a progress token whose notifications feed pl; stop unregisters it.
// Unregister only after pl.lines: go-sdk's client may run a notification's handler after the
// call's result has been returned, and a notification for an unknown token is dropped.
func (b *bench) watchProgress(pl *progressLines) (tok string, stop func()) {
	tok = "b" + strconv.FormatInt(b.nextTok.Add(1), 10)
	b.progress.Store(tok, pl)
	return tok, func() { b.progress.Delete(tok) }
}

// callWithToken calls a tool, asking for progress under tok when it is not "".
func (b *bench) callWithToken(ctx context.Context, tool string, args map[string]any, tok string) (map[string]any, error) {
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if tok != "" {
		params.SetProgressToken(tok)
	}
	res, err := b.session.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		var msg string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg += t.Text
			}
		}
		return nil, fmt.Errorf("%s: %s", tool, msg)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out, nil
}

// A mode runs the stamped command once and returns what the client saw.
type mode struct {
	name   string
	docker bool // only on the docker provider
	run    func(b *bench, ctx context.Context, cmd string, wait time.Duration) (run, error)
}

var modes = []mode{
	// The relay floor twice in each round, first and (as relay_floor) late: what two runs of
	// one thing differ by in the same bench run, the measure's own noise (issue 31's gaps).
	{name: "relay_floor_again", run: (*bench).relayFloor},
	{name: "mcp_exec_stream", run: (*bench).mcpExecStream},
	{name: "rest_exec_stream", run: (*bench).restExecStream},
	{name: "mcp_exec_stream_http", run: (*bench).mcpExecStreamHTTP},
	{name: "mcp_process_attach", run: (*bench).mcpProcessAttach},
	{name: "rest_exec_result", run: (*bench).restExecResult},
	{name: "mcp_terminal_poll", run: (*bench).mcpTerminalPoll},
	{name: "raw_daemon", run: (*bench).rawDaemon},
	{name: "e2b_passthrough", run: (*bench).e2bPassthrough},
	{name: "relay_floor", run: (*bench).relayFloor},
	{name: "docker_exec", docker: true, run: (*bench).dockerExec},
}

func knownMode(name string) bool {
	for _, m := range modes {
		if m.name == name {
			return true
		}
	}
	return false
}

// progressLines collects stamped lines from progress notifications. go-sdk's client may run a
// notification's handler after the call's result has been returned, so lines waits until the
// notifications reach the progress the result says was sent (an exec's byte count, an
// attach's next offset), not for a while.
type progressLines struct {
	mu       sync.Mutex
	lr       lineReader
	progress float64       // the highest progress notified
	changed  chan struct{} // closed, and replaced, at each feed
}

func newProgressLines() *progressLines { return &progressLines{changed: make(chan struct{})} }

func (p *progressLines) feed(msg string, progress float64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lr.feed(msg, at)
	p.progress = max(p.progress, progress)
	close(p.changed)
	p.changed = make(chan struct{})
}

// lines returns the lines once the notifications reached progress, or what came when ctx ends.
func (p *progressLines) lines(ctx context.Context, progress float64) []line {
	for {
		p.mu.Lock()
		reached, changed := p.progress >= progress, p.changed
		p.mu.Unlock()
		if reached {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line{}, p.lr.lines...)
}

func (b *bench) mcpExecStream(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	pl := newProgressLines()
	r := run{start: time.Now()}
	tok, stop := b.watchProgress(pl)
	defer stop()
	res, err := b.callWithToken(ctx, "exec", map[string]any{"sandbox": b.sandbox, "command": cmd, "stream": true}, tok)
	if err != nil {
		return r, err
	}
	// Progress counts the bytes of stdout and stderr sent.
	out, _ := res["stdout"].(string)
	errOut, _ := res["stderr"].(string)
	r.lines = pl.lines(ctx, float64(len(out)+len(errOut)))
	return r, nil
}

// mcpExecStreamHTTP is mcpExecStream read by a bare HTTP client instead of go-sdk's: the
// tools/call posted on the bench's MCP session and its SSE response read on this goroutine. It
// is a diagnostic, not the headline (mcp_exec_stream, a client people use): the difference
// between the two is what go-sdk's client adds (its reader goroutine, its JSON-RPC dispatch and
// a goroutine per notification), the rest is hangar and the SDK's server side.
func (b *bench) mcpExecStreamHTTP(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	var lr lineReader
	r := run{start: time.Now()}
	sess := benchkit.MCPSession{ID: b.session.ID(), Version: b.session.InitializeResult().ProtocolVersion}
	err := b.srv.MCPExecStream(ctx, sess, b.nextTok.Add(1), b.sandbox, cmd, func(msg string, at time.Time) { lr.feed(msg, at) })
	r.lines = lr.lines
	return r, err
}

// restStream posts to exec/stream and feeds stdout events to onData; it returns the result event.
func (b *bench) restStream(ctx context.Context, cmd string, onData func(data []byte, at time.Time)) (map[string]any, error) {
	return b.srv.ExecStream(ctx, b.sandbox, cmd, onData)
}

func (b *bench) restExecStream(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	var lr lineReader
	r := run{start: time.Now()}
	_, err := b.restStream(ctx, cmd, func(d []byte, at time.Time) { lr.feed(string(d), at) })
	r.lines = lr.lines
	return r, err
}

// mcpProcessAttach starts the command as a process and attaches to it as a client would: again
// from next until the process has exited, so a slow machine costs attaches, not lines.
func (b *bench) mcpProcessAttach(ctx context.Context, cmd string, wait time.Duration) (run, error) {
	pl := newProgressLines()
	r := run{start: time.Now()}
	started, err := b.call(ctx, "process", map[string]any{"action": "start", "sandbox": b.sandbox, "command": cmd})
	if err != nil {
		return r, err
	}
	id, _ := started["process_id"].(string)
	tok, stop := b.watchProgress(pl)
	defer stop()
	var next float64 // attach's progress is the output's byte offset
	for {
		res, err := b.callWithToken(ctx, "process", map[string]any{"action": "attach", "sandbox": b.sandbox, "process_id": id, "since": next,
			"wait_seconds": int(wait.Seconds()) + 2}, tok)
		if err != nil {
			return r, err
		}
		next, _ = res["next"].(float64)
		if state, _ := res["state"].(string); state == "exited" {
			break
		}
	}
	r.lines = pl.lines(ctx, next)
	return r, nil
}

func (b *bench) restExecResult(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	r := run{start: time.Now()}
	var res struct{ Stdout string }
	err := b.srv.api(ctx, "POST", "/api/sandboxes/"+b.sandbox+"/exec", map[string]any{"command": cmd}, &res)
	var lr lineReader
	lr.feed(res.Stdout, time.Now())
	r.lines = lr.lines
	return r, err
}

func (b *bench) mcpTerminalPoll(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	r := run{start: time.Now()}
	opened, err := b.call(ctx, "terminal_open", map[string]any{"sandbox": b.sandbox, "command": cmd})
	if err != nil {
		return r, err
	}
	id, _ := opened["terminal_id"].(string)
	defer b.call(context.WithoutCancel(ctx), "terminal_close", map[string]any{"terminal_id": id})
	var lr lineReader
	// A client that polls every second, until the command has exited (ctx bounds it).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		res, err := b.call(ctx, "terminal_read", map[string]any{"terminal_id": id})
		if err != nil {
			return r, err
		}
		out, _ := res["output"].(string)
		lr.feed(out, time.Now())
		if state, _ := res["state"].(string); state == "exited" {
			break
		}
	}
	r.lines = lr.lines
	return r, nil
}

func (b *bench) daemonClient(ctx context.Context) (*envd.Client, error) {
	url, token, err := b.daemonAddress(ctx)
	if err != nil {
		return nil, err
	}
	return envd.New(envd.Config{URL: url, AccessToken: token})
}

// daemonAddress is the URL and token of the bench's sandbox's daemon, from hangar's database.
func (b *bench) daemonAddress(ctx context.Context) (url, token string, err error) {
	st, err := sqlite.Open(ctx, b.srv.dataDir)
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	sb, err := st.GetSandbox(ctx, b.sandbox)
	if err != nil {
		return "", "", err
	}
	if sb.DaemonURL == "" {
		return "", "", errors.New("the sandbox has no daemon")
	}
	return sb.DaemonURL, sb.DaemonToken, nil
}

func (b *bench) rawDaemon(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	c, err := b.daemonClient(ctx)
	if err != nil {
		return run{}, err
	}
	defer c.Close()
	return timedDaemonRun(ctx, c, cmd)
}

// timedDaemonRun runs cmd through the daemon client c, its lines stamped as they arrive.
func timedDaemonRun(ctx context.Context, c *envd.Client, cmd string) (run, error) {
	var lr lineReader
	r := run{start: time.Now()}
	err := daemonStream(ctx, c, cmd, func(data []byte, at time.Time) { lr.feed(string(data), at) })
	r.lines = lr.lines
	return r, err
}

// e2bPassthrough runs the command as E2B's SDK does with E2B_SANDBOX_URL at hangar: a Start in
// Connect's JSON to /e2b/sandbox with the sandbox in E2b-Sandbox-Id, which hangar passes to the
// sandbox's daemon. The access token is the envdAccessToken hangar's E2B API answers to the
// SDK's Sandbox.connect, asked for before the clock starts.
func (b *bench) e2bPassthrough(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	var connected struct {
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if err := b.srv.api(ctx, "POST", "/e2b/v2/sandboxes/"+b.sandbox+"/connect", map[string]any{"timeout": 3600}, &connected); err != nil {
		return run{}, fmt.Errorf("connect through the E2B API: %w", err)
	}
	c, err := envd.New(envd.Config{URL: b.srv.url + "/e2b/sandbox", AccessToken: connected.EnvdAccessToken, JSON: true,
		HTTPClient: &http.Client{Transport: e2bSandboxHeader{id: b.sandbox, next: http.DefaultTransport}}})
	if err != nil {
		return run{}, err
	}
	defer c.Close()
	return timedDaemonRun(ctx, c, cmd)
}

// e2bSandboxHeader names the sandbox of every request as E2B's SDK does.
type e2bSandboxHeader struct {
	id   string
	next http.RoundTripper
}

func (h e2bSandboxHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	return h.next.RoundTrip(r)
}

// daemonStream runs cmd through the daemon c and feeds its stdout to onData as it arrives.
func daemonStream(ctx context.Context, c *envd.Client, cmd string, onData func(data []byte, at time.Time)) error {
	return benchkit.DaemonStream(ctx, c, cmd, onData)
}

func (b *bench) dockerExec(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	r := run{start: time.Now()}
	c := exec.CommandContext(ctx, "docker", "exec", b.container, "bash", "-lc", cmd)
	out, err := c.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := c.Start(); err != nil {
		return r, err
	}
	var lr lineReader
	_ = lr.readAll(out) // what it printed until then: Wait says how it ended
	r.lines = lr.lines
	return r, c.Wait()
}

// scaleResult is N concurrent streamed execs, through hangar (REST) or, as the floor of the
// same load, from the sandbox's daemon directly.
type scaleResult struct {
	// Via is "daemon" for the daemon's own streams read directly by one client; "": hangar.
	Via           string  `json:"via,omitempty"`
	Streams       int     `json:"streams"`
	Lines         int     `json:"lines"`
	Missing       int     `json:"lines_missing"`
	Failed        int     `json:"streams_failed"`
	DelayP50Ms    float64 `json:"line_delay_p50_ms"`
	DelayP95Ms    float64 `json:"line_delay_p95_ms"`
	DelayP99Ms    float64 `json:"line_delay_p99_ms"`
	MaxRSSBytes   int64   `json:"max_rss_bytes"`
	MaxGoroutines int     `json:"max_goroutines"`
	// hangar's open descriptors at most, in all and on its SQLite files (hangar.db, -wal, -shm).
	MaxFDs      int     `json:"max_fds,omitempty"`
	MaxDBFDs    int     `json:"max_db_fds,omitempty"`
	FirstError  string  `json:"first_error,omitempty"`
	WallSeconds float64 `json:"wall_seconds"`
	// hangar's own CPU time (user and system) while the streams ran, and per line received:
	// what the machine's load does not change much, unlike the delays.
	HangarCPUSeconds float64 `json:"hangar_cpu_seconds"`
	HangarCPUPerLine float64 `json:"hangar_cpu_us_per_line"`
	PerStreamLines   int     `json:"lines_per_stream"`
}

// scale runs n streams at once, each printing a line every interval for seconds, through
// hangar's REST exec/stream; with daemon, through one client of the sandbox's daemon instead
// (the floor: the same shells, the same daemon, no hangar).
func (b *bench) scale(ctx context.Context, n, seconds int, interval time.Duration, daemon bool) scaleResult {
	lines := max(1, int(time.Duration(seconds)*time.Second/interval))
	// Every stream opens first; lines start once the slowest shell is up, the streams' first
	// lines spread over one interval, as independent streams' would be. The shells end together
	// a second after the last line is due (with a tenth more for their drift): n shells ending
	// at once take the machine for a while (the kernel unmapping n address spaces), and every
	// line printed meanwhile would wait behind them, through hangar or not.
	from := time.Now().Add(2*time.Second + time.Duration(n)*10*time.Millisecond)
	step := interval / time.Duration(n)
	until := from.Add(interval + time.Duration(lines)*interval*11/10 + time.Second)
	var d delays
	var failed atomic.Int64
	var firstErr sync.Once
	res := scaleResult{Streams: n, PerStreamLines: lines}
	stream := func(cmd string, onData func([]byte, time.Time)) error {
		_, err := b.restStream(ctx, cmd, onData)
		return err
	}
	if daemon {
		res.Via = "daemon"
		c, err := b.daemonClient(ctx)
		if err != nil {
			res.Failed, res.FirstError = n, err.Error()
			return res
		}
		defer c.Close()
		stream = func(cmd string, onData func([]byte, time.Time)) error { return daemonStream(ctx, c, cmd, onData) }
	}
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { // sample memory and goroutines while it runs
		defer close(sampled)
		if daemon {
			return // hangar is not on the way
		}
		// Once a second: each sample costs hangar a /metrics page, which is not what is measured.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			res.MaxRSSBytes = max(res.MaxRSSBytes, b.srv.rss())
			res.MaxGoroutines = max(res.MaxGoroutines, b.goroutines(sctx))
			all, db := openFiles(b.srv.PID())
			res.MaxFDs, res.MaxDBFDs = max(res.MaxFDs, all), max(res.MaxDBFDs, db)
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	start, cpu0 := time.Now(), cpuSeconds(b.srv.PID())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		cmd := stampedCommandFrom(lines, interval, from.Add(time.Duration(i)*step), until)
		go func() {
			defer wg.Done()
			var lr lineReader
			if err := stream(cmd, func(data []byte, at time.Time) { lr.feed(string(data), at) }); err != nil {
				failed.Add(1)
				firstErr.Do(func() { res.FirstError = err.Error() })
			}
			d.add(lr.lines)
		}()
	}
	wg.Wait()
	stop()
	<-sampled
	res.WallSeconds = time.Since(start).Seconds()
	if !daemon {
		res.HangarCPUSeconds = cpuSeconds(b.srv.PID()) - cpu0
	}
	if d.n > 0 {
		res.HangarCPUPerLine = res.HangarCPUSeconds / float64(d.n) * 1e6
	}
	res.Lines, res.Failed = d.n, int(failed.Load())
	res.Missing = n*lines - d.n
	res.DelayP50Ms, res.DelayP95Ms, res.DelayP99Ms = percentile(d.ms, 50), percentile(d.ms, 95), percentile(d.ms, 99)
	return res
}

// cpuSeconds is the user and system CPU time process pid has used (/proc/<pid>/stat), or 0.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks: USER_HZ is 100 on Linux
}

// goroutines reads hangar's go_goroutines from /metrics, asking for the page uncompressed: a
// gzipped page costs hangar a compressor of a megabyte or more each time, in the middle of
// the streams measured.
func (b *bench) goroutines(ctx context.Context) int {
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.url+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := b.srv.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// rateResult is one stream's measured rate.
type rateResult struct {
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	Setting        int64   `json:"setting_bytes_per_second,omitempty"`
	ErrorPercent   float64 `json:"error_percent,omitempty"`
	Closed         string  `json:"closed,omitempty"`
}

// rate streams size bytes as fast as the command can print them and measures how fast they
// arrive, from the first output event to the last.
func (b *bench) rate(ctx context.Context, size int64) (rateResult, error) {
	cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", size)
	var first, last time.Time
	var got, firstChunk int64
	res, err := b.restStream(ctx, cmd, func(data []byte, at time.Time) {
		if first.IsZero() {
			first, firstChunk = at, int64(len(data))
		}
		last = at
		got += int64(len(data))
	})
	out := rateResult{Bytes: got}
	if err != nil {
		return out, err
	}
	if c, _ := res["closed"].(string); c != "" {
		out.Closed = c
	}
	if s := last.Sub(first).Seconds(); s > 0 {
		out.Seconds = s
		out.BytesPerSecond = float64(got-firstChunk) / s
	}
	return out, nil
}

func (b *bench) destroy(ctx context.Context) {
	b.stopRelay()
	if b.session != nil {
		b.session.Close()
	}
	b.srv.api(ctx, "DELETE", "/api/sandboxes/"+b.sandbox, nil, nil)
}
