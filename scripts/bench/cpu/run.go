package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// A subject is a process whose instructions are counted: started behind valgrind, given the
// streams, stopped (valgrind writes its count as the process exits).
type subject struct {
	name, label, target string
	start               func(ctx context.Context, e *env, wrap []string, dir string) (measured, error)
}

// measured is a subject's running process: stream runs a command through it and passes what
// the client receives to onData; stop ends it and waits for it to exit.
type measured interface {
	stream(ctx context.Context, cmd string, onData func(data []byte)) error
	stop()
}

var subjectList = []subject{
	{"rest", "hangar REST: exec/stream, SSE", "marginal ≤ 22k a line, fixed ≤ 0.6M an exec", startREST},
	{"mcp", "hangar MCP: exec(stream=true) with progress, a bare HTTP client", "marginal ≤ 40k a line, fixed ≤ 2.5M a call", startMCP},
	{"relay_floor", "the relay floor: the daemon's stream through a one-goroutine TCP relay", "", startRelay},
	{"envd", "hangar-envd: the daemon's own stream (Start), read by hangar's envd client", "marginal ≤ 30k a line", startEnvd},
}

var subjectsByName = func() map[string]subject {
	m := map[string]subject{}
	for _, s := range subjectList {
		m[s.name] = s
	}
	return m
}()

// env is what the subjects share: the binaries, and a daemon of the relay's (not measured).
type env struct {
	hangar, envd string
	work         string
	daemon       *benchkit.Daemon // started for the relay floor's first run
}

// sample is one run of a subject: its load and the instructions its process ran.
type sample struct {
	LinesPerStream int     `json:"lines_per_stream"`
	Streams        int     `json:"streams"`
	Instructions   uint64  `json:"instructions"`
	LinesReceived  int     `json:"lines_received"`
	Messages       int     `json:"messages_received"`
	Failed         int     `json:"streams_failed"`
	FirstError     string  `json:"first_error,omitempty"`
	LoadSeconds    float64 `json:"load_seconds"`
	TotalSeconds   float64 `json:"total_seconds"`
}

// result is a subject's runs and the figures drawn from them.
type result struct {
	Name  string   `json:"name"`
	Label string   `json:"label"`
	Runs  []sample `json:"runs"`
	// Instructions a line beyond the low run's, and a stream's own (its lines' marginal cost
	// taken out): the medians over the repeats.
	MarginalPerLine  float64 `json:"marginal_instructions_per_line"`
	FixedPerStream   float64 `json:"fixed_instructions_per_stream"`
	Target           string  `json:"target,omitempty"`
	MessagesPerLine  float64 `json:"messages_per_line_high"`
	LinesMissing     int     `json:"lines_missing"`
	StreamsFailed    int     `json:"streams_failed"`
	FirstStreamError string  `json:"first_error,omitempty"`
}

func run(ctx context.Context, c config) error {
	work, err := os.MkdirTemp("", "hangar-bench-cpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	e := &env{hangar: c.hangar, work: work}
	if e.hangar == "" {
		fmt.Println("building hangar and hangar-envd")
		if e.hangar, err = benchkit.Build(ctx, work); err != nil {
			return err
		}
	}
	e.envd = filepath.Join(filepath.Dir(e.hangar), "hangar-envd")
	if _, err := os.Stat(e.envd); err != nil {
		return fmt.Errorf("no hangar-envd beside %s: %w", e.hangar, err)
	}
	defer func() {
		if e.daemon != nil {
			e.daemon.Stop()
		}
	}()
	rep := report{Date: c.date, Machine: benchkit.MachineInfo(), LoadBefore: benchkit.LoadAvgs(), Streams: c.streams, Low: c.low, High: c.high, Seconds: c.seconds, Repeats: c.runs,
		Method: fmt.Sprintf("valgrind --tool=cachegrind --cache-sim=no, the measured process with GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off; per subject and repeat three runs of %d s: idle, %d streams × %d lines, %d × %d; marginal = (Ir high − Ir low) ÷ (%d × %d lines); fixed per stream = (Ir low − Ir idle) ÷ %d − %d × marginal",
			c.seconds, c.streams, c.low, c.streams, c.high, c.streams, c.high-c.low, c.streams, c.low)}
	if c.godebug != "" {
		rep.Method += "; also GODEBUG " + c.godebug
	}
	results := map[string]*result{}
	for i := 0; i < c.runs; i++ {
		for _, name := range c.subjects {
			s := subjectsByName[name]
			r := results[name]
			if r == nil {
				r = &result{Name: name, Label: s.label, Target: s.target}
				results[name] = r
			}
			for _, lines := range []int{0, c.low, c.high} {
				smp, err := measureOnce(ctx, c, e, s, lines)
				if err != nil {
					return fmt.Errorf("%s, %d lines: %w", name, lines, err)
				}
				fmt.Printf("%-12s %3d streams × %3d lines: %14d instructions, %5d lines in %5d messages, %d failed %s (load %.1f s of %.1f s)\n",
					name, smp.Streams, lines, smp.Instructions, smp.LinesReceived, smp.Messages, smp.Failed, smp.FirstError, smp.LoadSeconds, smp.TotalSeconds)
				r.Runs = append(r.Runs, smp)
			}
		}
	}
	rep.LoadAfter = benchkit.LoadAvgs()
	for _, name := range c.subjects {
		r := results[name]
		summarise(c, r)
		fmt.Printf("%-12s marginal %.1fk instructions a line, fixed %.2fM a stream\n", name, r.MarginalPerLine/1e3, r.FixedPerStream/1e6)
		rep.Subjects = append(rep.Subjects, *r)
	}
	return write(c, rep)
}

// summarise draws the marginal and fixed costs from r's runs (idle, low, high per repeat).
func summarise(c config, r *result) {
	var marginal, fixed []float64
	for i := 0; i+2 < len(r.Runs); i += 3 {
		idle, low, high := r.Runs[i], r.Runs[i+1], r.Runs[i+2]
		m := (float64(high.Instructions) - float64(low.Instructions)) / float64(c.streams*(c.high-c.low))
		marginal = append(marginal, m)
		fixed = append(fixed, (float64(low.Instructions)-float64(idle.Instructions))/float64(c.streams)-float64(c.low)*m)
		r.MessagesPerLine = float64(high.Messages) / float64(max(1, high.LinesReceived))
		for _, s := range []sample{low, high} {
			r.LinesMissing += s.Streams*s.LinesPerStream - s.LinesReceived
			r.StreamsFailed += s.Failed
			if r.FirstStreamError == "" {
				r.FirstStreamError = s.FirstError
			}
		}
	}
	r.MarginalPerLine, r.FixedPerStream = median(marginal), median(fixed)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// measureOnce starts s's process under valgrind, runs c.streams streams of lines lines each
// over c.seconds (none: it idles as long), stops it and reads the instructions it ran.
func measureOnce(ctx context.Context, c config, e *env, s subject, lines int) (sample, error) {
	dir, err := os.MkdirTemp(e.work, s.name+"-")
	if err != nil {
		return sample{}, err
	}
	out := filepath.Join(dir, "cachegrind.out")
	// cpu.rdtscp=off: the runtime's cputicks then reads the clock with RDTSC, which valgrind
	// runs everywhere. Its RDTSCP killed the measured process with SIGILL on AMD EPYC VMs here,
	// whose CPU lacks it while valgrind's CPUID says it is there.
	godebug := "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"
	if c.godebug != "" {
		godebug += "," + c.godebug
	}
	wrap := []string{"env", godebug, "valgrind", "--tool=cachegrind", "--cache-sim=no",
		"--cachegrind-out-file=" + out, "--log-file=" + filepath.Join(dir, "valgrind.log")}
	began := time.Now()
	m, err := s.start(ctx, e, wrap, dir)
	if err != nil {
		return sample{}, err
	}
	smp := sample{LinesPerStream: lines}
	load := time.Now()
	// Every run lasts as long: its streams' time, plus two seconds for them to start.
	until := load.Add(time.Duration(c.seconds)*time.Second + 2*time.Second)
	if lines > 0 {
		smp.Streams = c.streams
		streams(ctx, c, m, lines, &smp)
	}
	select {
	case <-time.After(time.Until(until)):
	case <-ctx.Done():
	}
	smp.LoadSeconds = time.Since(load).Seconds()
	m.stop()
	smp.TotalSeconds = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return smp, ctx.Err()
	}
	smp.Instructions, err = instructions(out)
	if err == nil && c.keep != "" {
		err = keep(out, filepath.Join(c.keep, fmt.Sprintf("%s-%d.cachegrind.out", s.name, lines)))
	}
	return smp, err
}

// keep copies valgrind's file to path.
func keep(from, path string) error {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	return err
}

// streams runs c.streams commands printing lines lines each over c.seconds through m at once,
// and counts the lines and messages received.
func streams(ctx context.Context, c config, m measured, lines int, smp *sample) {
	interval := float64(c.seconds) / float64(lines)
	// One line every interval, the same length in every run; read -t on a pipe nobody writes
	// instead of sleep, and printf, bash's own: no process is started per line.
	cmd := fmt.Sprintf(`exec 9<> <(:); for ((i = 1; i <= %d; i++)); do read -t %.3f -u 9; printf 'L %%04d %%s\n' $i $EPOCHREALTIME; done`, lines, interval)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < c.streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got, msgs int
			err := m.stream(ctx, cmd, func(data []byte) {
				msgs++
				got += strings.Count(string(data), "\n")
			})
			mu.Lock()
			defer mu.Unlock()
			smp.LinesReceived += got
			smp.Messages += msgs
			if err != nil {
				smp.Failed++
				if smp.FirstError == "" {
					smp.FirstError = err.Error()
				}
			}
		}()
	}
	wg.Wait()
}

// instructions reads the total Ir of a cachegrind out file (its summary: line).
func instructions(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("valgrind wrote no figures (see valgrind.log beside %s): %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseUint(strings.Fields(v)[0], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no summary line", path)
}

// hangarSubject is a `hangar serve` under valgrind with a local sandbox, the daemon of which
// (hangar-envd, a child) runs natively.
type hangarSubject struct {
	srv     *benchkit.Server
	session *mcp.ClientSession // the MCP subject's
	nextID  int64
	mu      sync.Mutex
}

func startHangar(ctx context.Context, e *env, wrap []string, dir string) (*hangarSubject, error) {
	// Limits raised as the streams bench raises them; the pace stays the default.
	srv, err := benchkit.StartWrapped(ctx, wrap, e.hangar, dir, "HANGAR_STREAM_MAX_PER_TOKEN=4096", "HANGAR_STREAM_MAX_TOTAL=8192")
	if err != nil {
		return nil, err
	}
	if err := srv.API(ctx, "POST", "/api/sandboxes", map[string]any{"name": "cpu", "provider": "local"}, nil); err != nil {
		srv.Stop()
		return nil, err
	}
	return &hangarSubject{srv: srv}, nil
}

func (h *hangarSubject) stop() {
	if h.session != nil {
		h.session.Close()
	}
	h.srv.API(context.Background(), "DELETE", "/api/sandboxes/cpu", nil, nil)
	h.srv.Stop()
}

type restSubject struct{ *hangarSubject }

func startREST(ctx context.Context, e *env, wrap []string, dir string) (measured, error) {
	h, err := startHangar(ctx, e, wrap, dir)
	if err != nil {
		return nil, err
	}
	return restSubject{h}, nil
}

func (r restSubject) stream(ctx context.Context, cmd string, onData func([]byte)) error {
	_, err := r.srv.ExecStream(ctx, "cpu", cmd, func(data []byte, _ time.Time) { onData(data) })
	return err
}

type mcpSubject struct{ *hangarSubject }

// startMCP is hangar with an MCP session (go-sdk's client initialised it, in every run alike);
// its calls are posted and read by a bare HTTP client.
func startMCP(ctx context.Context, e *env, wrap []string, dir string) (measured, error) {
	h, err := startHangar(ctx, e, wrap, dir)
	if err != nil {
		return nil, err
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "hangar-bench-cpu", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: h.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: benchkit.Bearer{Token: h.srv.Token, Next: h.srv.HTTP.Transport}}, MaxRetries: -1}
	if h.session, err = cl.Connect(ctx, tr, nil); err != nil {
		h.stop()
		return nil, fmt.Errorf("connect MCP: %w", err)
	}
	return mcpSubject{h}, nil
}

func (m mcpSubject) stream(ctx context.Context, cmd string, onData func([]byte)) error {
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.mu.Unlock()
	sess := benchkit.MCPSession{ID: m.session.ID(), Version: m.session.InitializeResult().ProtocolVersion}
	return m.srv.MCPExecStream(ctx, sess, id, "cpu", cmd, func(msg string, _ time.Time) { onData([]byte(msg)) })
}

type relaySubject struct{ relay *benchkit.Relay }

// startRelay is benchkit's relay under valgrind, of a hangar-envd that runs natively (started
// once, for every relay run).
func startRelay(ctx context.Context, e *env, wrap []string, _ string) (measured, error) {
	if e.daemon == nil {
		dir := filepath.Join(e.work, "relay-daemon")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		d, err := benchkit.StartDaemon(ctx, nil, e.envd, dir)
		if err != nil {
			return nil, err
		}
		e.daemon = d
	}
	r, err := benchkit.StartRelay(ctx, wrap, e.daemon.URL, "")
	if err != nil {
		return nil, err
	}
	return relaySubject{r}, nil
}

func (r relaySubject) stream(ctx context.Context, cmd string, onData func([]byte)) error {
	conn, err := r.relay.Dial(ctx, cmd)
	if err != nil {
		return err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			onData(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r relaySubject) stop() { r.relay.Stop() }

type envdSubject struct {
	daemon *benchkit.Daemon
	client *envd.Client
}

// startEnvd is hangar-envd under valgrind, read by hangar's envd client (natively).
func startEnvd(ctx context.Context, e *env, wrap []string, dir string) (measured, error) {
	d, err := benchkit.StartDaemon(ctx, wrap, e.envd, dir)
	if err != nil {
		return nil, err
	}
	c, err := envd.New(envd.Config{URL: d.URL})
	if err != nil {
		d.Stop()
		return nil, err
	}
	return envdSubject{d, c}, nil
}

func (s envdSubject) stream(ctx context.Context, cmd string, onData func([]byte)) error {
	return benchkit.DaemonStream(ctx, s.client, cmd, func(data []byte, _ time.Time) { onData(data) })
}

func (s envdSubject) stop() {
	s.client.Close()
	s.daemon.Stop()
}
