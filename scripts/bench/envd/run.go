package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker"
)

// report is one invocation's results: bench/results/<date>-envd.json.
type report struct {
	Date    string   `json:"date"`
	Machine machine  `json:"machine"`
	Runs    int      `json:"runs"`
	Daemons []result `json:"daemons"`
	Notes   []string `json:"notes,omitempty"`
}

type machine struct {
	Cores      int    `json:"cores"`
	GoVersion  string `json:"go_version"`
	Commit     string `json:"commit"`
	LoadBefore string `json:"loadavg_before"` // /proc/loadavg: the machine is shared
	LoadAfter  string `json:"loadavg_after"`
}

// result is one daemon's figures. Footprint fields are zero for a daemon given by -url.
type result struct {
	Name            string    `json:"name"`
	What            string    `json:"what"`
	BinaryBytes     int64     `json:"binary_bytes,omitempty"`
	RestRSSBytes    int64     `json:"rest_rss_bytes,omitempty"` // median over runs, after /health and one command
	RestThreads     int       `json:"rest_threads,omitempty"`
	StreamsRSSBytes int64     `json:"streams_rss_bytes,omitempty"` // highest while the concurrent streams ran
	StreamsThreads  int       `json:"streams_threads,omitempty"`
	DelayP50Ms      float64   `json:"delay_p50_ms"`
	DelayP95Ms      float64   `json:"delay_p95_ms"`
	ThroughputMiBs  float64   `json:"throughput_mib_s"` // median over runs
	ThroughputRuns  []float64 `json:"throughput_runs_mib_s"`
	// ThroughputRSSBytes is the highest RSS while one stream moved as fast as it could: what
	// waits for the client (up to the starter's queue bound) is on the heap then.
	ThroughputRSSBytes int64   `json:"throughput_rss_bytes,omitempty"`
	Streams            int     `json:"streams"`
	StreamsP50Ms       float64 `json:"streams_delay_p50_ms"`
	StreamsP95Ms       float64 `json:"streams_delay_p95_ms"`
	StreamsP99Ms       float64 `json:"streams_delay_p99_ms"`
	StreamsMissing     int     `json:"streams_lines_missing"`
	StartupP50Ms       float64 `json:"docker_startup_p50_ms,omitempty"` // sandbox create to daemon healthy
	StartupMaxMs       float64 `json:"docker_startup_max_ms,omitempty"`

	delays, streamDelays, tputs, startups []float64
	rests                                 []int64
}

func run(ctx context.Context, c config) error {
	dir, err := os.MkdirTemp("", "bench-envd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	rep := report{Date: c.date, Runs: c.runs, Machine: machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Commit: commit(root), LoadBefore: loadavg()}}
	var subs []subject
	if c.url == "" {
		if subs, err = subjects(c, dir); err != nil {
			return err
		}
	}
	results := make([]*result, 0, 2)
	if c.url != "" {
		results = append(results, &result{Name: cmp(c.name, c.url), What: c.url})
	}
	for _, s := range subs {
		r := &result{Name: s.name, What: s.desc}
		if st, err := os.Stat(s.bin); err == nil {
			r.BinaryBytes = st.Size()
		}
		results = append(results, r)
	}
	// Interleaved: run i of every daemon before run i+1 of any.
	for i := range c.runs {
		for j, r := range results {
			fmt.Printf("run %d/%d: %s\n", i+1, c.runs, r.Name)
			if c.url != "" {
				err = measureWire(ctx, c, r, c.url, c.token, nil)
			} else {
				err = measureOwn(ctx, c, r, subs[j], filepath.Join(dir, fmt.Sprint(i, "-", j)))
			}
			if err != nil {
				return fmt.Errorf("%s: %w", r.Name, err)
			}
		}
	}
	if c.url == "" && c.docker {
		if note := measureStartup(ctx, c, subs, results); note != "" {
			rep.Notes = append(rep.Notes, note)
		}
	}
	rep.Machine.LoadAfter = loadavg()
	for _, r := range results {
		r.summarise(c.streams)
		rep.Daemons = append(rep.Daemons, *r)
	}
	return write(c, rep)
}

// measureOwn starts s and measures its footprint and wire speed once.
func measureOwn(ctx context.Context, c config, r *result, s subject, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d, err := s.start(ctx, dir)
	if err != nil {
		return err
	}
	defer d.Stop()
	cl, err := envd.New(envd.Config{URL: d.URL})
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.Health(ctx); err != nil {
		return err
	}
	// At rest: it has answered /health and run one command, and settled for a second.
	if _, _, err := delays(ctx, cl, 1, time.Millisecond, time.Now()); err != nil {
		return err
	}
	time.Sleep(time.Second)
	rss, threads, err := procStatus(d.PID())
	if err != nil {
		return err
	}
	r.rests = append(r.rests, rss)
	r.RestThreads = max(r.RestThreads, threads)
	return measureWire(ctx, c, r, d.URL, "", func() *sampler { return sample(d.PID()) })
}

// measureWire runs the latency, concurrent and throughput measures once against url (the
// throughput last: the output it queues leaves the heap grown for a while). sampleFn, when
// set, samples the daemon's RSS and threads while the concurrent streams and the throughput
// run.
func measureWire(ctx context.Context, c config, r *result, url, token string, sampleFn func() *sampler) error {
	cl, err := envd.New(envd.Config{URL: url, AccessToken: token})
	if err != nil {
		return err
	}
	defer cl.Close()
	d, _, err := delays(ctx, cl, c.lines, c.interval, time.Now().Add(200*time.Millisecond))
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	r.delays = append(r.delays, d...)

	smp := startSampling(sampleFn)
	d, missing, err := concurrent(ctx, cl, c.streams, c.streamSeconds)
	if smp != nil {
		rss, th := smp.stop()
		r.StreamsRSSBytes, r.StreamsThreads = max(r.StreamsRSSBytes, rss), max(r.StreamsThreads, th)
	}
	if err != nil {
		return fmt.Errorf("%d streams: %w", c.streams, err)
	}
	r.streamDelays = append(r.streamDelays, d...)
	r.StreamsMissing += missing

	smp = startSampling(sampleFn)
	tp, err := throughput(ctx, cl, c.throughputMiB)
	if smp != nil {
		rss, _ := smp.stop()
		r.ThroughputRSSBytes = max(r.ThroughputRSSBytes, rss)
	}
	if err != nil {
		return err
	}
	r.tputs = append(r.tputs, tp)
	return nil
}

func startSampling(fn func() *sampler) *sampler {
	if fn == nil {
		return nil
	}
	return fn()
}

// measureStartup times Docker sandboxes with a daemon from create to healthy (the provider's
// Create: container created and started, /health polled every 50 ms, the token given), each
// subject's binary mounted in turn. It returns a note when it could not.
func measureStartup(ctx context.Context, c config, subs []subject, results []*result) string {
	for i := range c.runs {
		for j, s := range subs {
			p, err := docker.New(docker.Config{Image: c.dockerImage, EnvdBinary: s.bin, Instance: "bench-envd"})
			if err != nil {
				return fmt.Sprintf("Docker start-up not measured: %v", err)
			}
			start := time.Now()
			sb, err := p.Create(ctx, provider.Spec{Name: fmt.Sprintf("bench-envd-%d-%d-%d", os.Getpid(), i, j), Daemon: true})
			took := time.Since(start)
			if err == nil {
				_ = p.Destroy(context.WithoutCancel(ctx), sb)
			}
			p.Close()
			switch {
			case errors.Is(err, provider.ErrUnavailable):
				return "Docker start-up not measured: no engine answers"
			case err != nil:
				return fmt.Sprintf("Docker start-up not measured: %v", err)
			case sb.State != provider.StateRunning:
				return fmt.Sprintf("Docker start-up not measured: the sandbox is %s (%s)", sb.State, sb.Reason)
			}
			results[j].startups = append(results[j].startups, float64(took.Microseconds())/1000)
		}
	}
	return ""
}

func (r *result) summarise(streams int) {
	r.DelayP50Ms, r.DelayP95Ms = percentile(r.delays, 50), percentile(r.delays, 95)
	r.ThroughputMiBs, r.ThroughputRuns = percentile(r.tputs, 50), r.tputs
	r.Streams = streams
	r.StreamsP50Ms, r.StreamsP95Ms, r.StreamsP99Ms = percentile(r.streamDelays, 50), percentile(r.streamDelays, 95), percentile(r.streamDelays, 99)
	if len(r.rests) > 0 {
		slices.Sort(r.rests)
		r.RestRSSBytes = r.rests[len(r.rests)/2]
	}
	if len(r.startups) > 0 {
		r.StartupP50Ms, r.StartupMaxMs = percentile(r.startups, 50), percentile(r.startups, 100)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
