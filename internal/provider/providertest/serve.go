package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Serve is a `hangar serve` process on a loopback port it keeps across restarts, for the tests
// that drive hangar from outside (the CLI, a browser, replicas of one service).
type Serve struct {
	URL  string      // http://Addr
	Addr string      // the loopback address it listens on, picked free by NewServe
	Dir  string      // its --data-dir, and its HOME
	Logs *SyncBuffer // its stdout and stderr, over all its starts

	bin  string
	args []string

	mu  sync.Mutex // guards cmd
	cmd *exec.Cmd  // nil while it is not running
}

// NewServe picks a free loopback port for `bin serve` with its data in dir and args (more of
// serve's flags) after --listen and --data-dir. It starts nothing: Start does.
func NewServe(bin, dir string, args ...string) (*Serve, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pick a port for hangar serve: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &Serve{URL: "http://" + addr, Addr: addr, Dir: dir, Logs: &SyncBuffer{}, bin: bin, args: args}, nil
}

// Start starts hangar serve and waits until its /readyz answers 200. If ctx ends first, it
// stops it and returns an error with its log.
func (s *Serve) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{"serve", "--listen", s.Addr, "--data-dir", s.Dir}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = s.Logs, s.Logs
	cmd.Env = append(os.Environ(), "HOME="+s.Dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start hangar serve: %w", err)
	}
	s.cmd = cmd
	for {
		if r, err := http.Get(s.URL + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			s.signal(syscall.SIGKILL)
			return fmt.Errorf("hangar serve did not get ready: %s", s.Logs.String())
		case <-time.After(50 * time.Millisecond): // polling for readiness, until ctx's deadline
		}
	}
}

// Stop ends hangar serve as a shutdown does (SIGTERM) and waits for it to exit; it does
// nothing when it is not running.
func (s *Serve) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signal(syscall.SIGTERM)
}

// Kill ends hangar serve as a crash does (SIGKILL): it hands nothing back.
func (s *Serve) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signal(syscall.SIGKILL)
}

// Running says whether it was started and has not been stopped or killed since.
func (s *Serve) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// signal sends sig to the process and waits for it to exit; s.mu is held.
func (s *Serve) signal(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	s.cmd.Wait()
	s.cmd = nil
}

// AdminToken is the admin token hangar serve made in Dir on its first start.
func (s *Serve) AdminToken() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, "admin-token"))
	if err != nil {
		return "", fmt.Errorf("read the admin token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// API sends method path with body to hangar serve with token and returns its JSON answer,
// failing the test when hangar cannot be reached or refuses (a status of 300 or more).
func (s *Serve) API(t testing.TB, method, path, token, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	raw, _ := io.ReadAll(r.Body)
	if r.StatusCode >= 300 {
		t.Fatalf("%s %s = %d %s", method, path, r.StatusCode, raw)
	}
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}

// SyncBuffer is a bytes.Buffer that a process's output (or a server's goroutines) and the
// test may share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
