// Package benchkit is what the programs under scripts/bench share: a `hangar serve` started on
// loopback with a fresh data dir, its JSON API, its metrics and memory, a Server-Sent Events
// reader, and building the hangar binary they measure.
package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a `hangar serve` this program started, on loopback, with a fresh data dir. Its
// token is a static one with the user and mcp scopes.
type Server struct {
	URL, Token, DataDir string
	HTTP                *http.Client
	cmd                 *exec.Cmd
}

// Build builds ./cmd/hangar at dir/hangar and ./cmd/hangar-envd beside it (static: it is the
// daemon and harness sandboxes run, mounted into containers), and returns hangar's path.
func Build(ctx context.Context, dir string) (string, error) {
	for _, name := range []string{"hangar", "hangar-envd"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v: %s", name, err, b)
		}
	}
	return filepath.Join(dir, "hangar"), nil
}

// envdBeside is the hangar-envd beside the hangar binary bin, which sandboxes run, or bin
// itself (its envd verb) when there is none.
func envdBeside(bin string) string {
	envd := filepath.Join(filepath.Dir(bin), "hangar-envd")
	if _, err := os.Stat(envd); err == nil {
		return envd
	}
	return bin
}

// Start runs bin as `hangar serve` in dir (its data dir, tokens file and log hangar.log) with
// the given extra environment, and waits until it is ready.
func Start(ctx context.Context, bin, dir string, env ...string) (*Server, error) {
	return StartWrapped(ctx, nil, bin, dir, env...)
}

// StartWrapped is Start with the server run behind wrap, a command that runs it (valgrind's,
// for one), given 5 minutes instead of 30 s to become ready.
func StartWrapped(ctx context.Context, wrap []string, bin, dir string, env ...string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	b := make([]byte, 24)
	rand.Read(b)
	s := &Server{URL: "http://" + addr, Token: "bench-" + hex.EncodeToString(b), DataDir: filepath.Join(dir, "data"),
		HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(s.Token+" bench user,mcp\n"), 0o600); err != nil {
		return nil, err
	}
	argv := append(append(append([]string{}, wrap...), bin), "serve")
	s.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	s.cmd.Env = append(os.Environ(), "HANGAR_LISTEN="+addr, "HANGAR_DATA_DIR="+s.DataDir, "HANGAR_TOKENS_FILE="+tokens,
		"HANGAR_DAEMON_BINARY="+envdBeside(bin), "HANGAR_LOG_LEVEL=warn")
	s.cmd.Env = append(s.cmd.Env, env...)
	logf, err := os.Create(filepath.Join(dir, "hangar.log"))
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with this program, however it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	// Behind a wrapper (valgrind counting the server's instructions) it is asked less often:
	// each /readyz is work the server does, and how many there are depends on how long it
	// takes to start, which a loaded machine changes.
	ready, poll := 30*time.Second, 20*time.Millisecond
	if len(wrap) > 0 {
		ready, poll = 5*time.Minute, 500*time.Millisecond
	}
	deadline := time.Now().Add(ready)
	for {
		resp, err := http.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("hangar did not become ready: %v (see %s)", err, logf.Name())
		}
		time.Sleep(poll)
	}
}

// PID is the server process's id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop interrupts the server and waits for it (killing it after 30 s).
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
	s.HTTP.CloseIdleConnections()
}

// API does a JSON request with the server's token and decodes the answer into out (when set).
func (s *Server) API(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Metric reads one sample of a metric without labels from /metrics.
func (s *Server) Metric(name string) float64 {
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// RSS is the server process's resident memory in bytes.
func (s *Server) RSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// SSEEvents reads Server-Sent Events from r, calling fn with each event's name and data,
// until r ends (nil) or fn returns an error.
func SSEEvents(r io.Reader, fn func(name string, data []byte) error) error {
	return SSEEventsWithID(r, func(_, name string, data []byte) error { return fn(name, data) })
}

// SSEEventsWithID is SSEEvents that also passes each event's id (empty when it has none).
func SSEEventsWithID(r io.Reader, fn func(id, name string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var id, name string
	var data []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, err2 := br.ReadBytes('\n')
			line, err = append(append([]byte{}, line...), rest...), err2
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = bytes.TrimRight(line, "\n")
		switch {
		case len(line) == 0:
			if name != "" || data != nil {
				if err := fn(id, name, data); err != nil {
					return err
				}
			}
			id, name, data = "", "", nil
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[4:])
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append([]byte{}, line[6:]...)
		}
	}
}

// Machine is what a results file says of the machine and the code measured.
type Machine struct {
	Cores        int    `json:"cores"`
	MemoryBytes  int64  `json:"memory_bytes"`
	GoVersion    string `json:"go_version"`
	HangarCommit string `json:"hangar_commit"`
	Kernel       string `json:"kernel,omitempty"`
}

// MachineInfo describes this machine and the checkout's commit ("-dirty" when code outside
// bench/ has changes).
func MachineInfo() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.MemoryBytes = kb << 10
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.HangarCommit = strings.TrimSpace(string(out))
		// Changes under bench/ are the benches' own results, not the code measured.
		if out, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench").Output(); len(out) > 0 {
			m.HangarCommit += "-dirty"
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// LoadAvg is the machine's 1-minute load average (0 when unknown): results taken on a shared
// machine say how loaded it was.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscanf(string(b), "%f", &l)
	return l
}

// LoadAvgs is the machine's 1, 5 and 15-minute load averages (/proc/loadavg), or nil where
// there are none.
func LoadAvgs() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}
