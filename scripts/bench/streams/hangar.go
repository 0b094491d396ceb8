package main

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
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a `hangar serve` this program started, on loopback, with a fresh data dir.
type server struct {
	url, token, dataDir string
	cmd                 *exec.Cmd
	http                *http.Client
}

// startServer runs bin as `hangar serve` with the given extra environment.
func startServer(ctx context.Context, bin, dir string, env ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	b := make([]byte, 24)
	rand.Read(b)
	s := &server{url: "http://" + addr, token: "bench-" + hex.EncodeToString(b), dataDir: filepath.Join(dir, "data"),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(s.token+" bench user,mcp\n"), 0o600); err != nil {
		return nil, err
	}
	s.cmd = exec.CommandContext(ctx, bin, "serve")
	s.cmd.Env = append(os.Environ(), "HANGAR_LISTEN="+addr, "HANGAR_DATA_DIR="+s.dataDir, "HANGAR_TOKENS_FILE="+tokens,
		"HANGAR_DAEMON_BINARY="+bin, "HANGAR_LOG_LEVEL=warn")
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("hangar did not become ready: %v (see %s)", err, logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
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
	s.http.CloseIdleConnections()
}

// api does a JSON request and decodes the answer.
func (s *server) api(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
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

// metric reads one sample of a metric without labels from /metrics.
func (s *server) metric(name string) float64 {
	resp, err := http.Get(s.url + "/metrics")
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

// rss is the server process's resident memory in bytes.
func (s *server) rss() int64 {
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

// sseEvents reads Server-Sent Events from r, calling fn with each event's name and data.
func sseEvents(r io.Reader, fn func(name string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var name string
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
				if err := fn(name, data); err != nil {
					return err
				}
			}
			name, data = "", nil
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append([]byte{}, line[6:]...)
		}
	}
}
