// Package pgtest runs a PostgreSQL of a test's own — a cluster in a temporary folder, on a free
// loopback port, as the postgres user — for tests that stop and start the database under a
// running hangar (the store's shared suite uses the one HANGAR_TEST_DATABASE_URL names).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runTimeout bounds each of PostgreSQL's programs (initdb, pg_ctl start and stop).
const runTimeout = 90 * time.Second

// Server is a running private cluster.
type Server struct {
	dir  string // the cluster's folder (data/, log, the socket), owned by postgres
	bin  string // PostgreSQL's programs
	port int
	cred *syscall.Credential
}

// Start makes a cluster and starts it; it is stopped and removed when t ends. A machine that
// cannot (no PostgreSQL programs under /usr/lib/postgresql, no postgres user, not root) skips
// t with a sentence that says so — or fails it under CI=true, where the service must be.
func Start(t testing.TB) *Server {
	t.Helper()
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(initdbs)
	switch {
	case len(initdbs) == 0:
		skip(t, "SKIPPING: no PostgreSQL programs under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
	case os.Geteuid() != 0:
		skip(t, "SKIPPING: a PostgreSQL of the test's own needs root, to run it as the postgres user")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		skip(t, "SKIPPING: no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "hangar-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{dir: dir, bin: filepath.Dir(initdbs[len(initdbs)-1]), port: port,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if out, err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	t.Cleanup(func() { s.Stop() })
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	return s
}

func skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// URL is the cluster's address for hangar (HANGAR_DATABASE_URL).
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Stop stops the cluster at once, as a crash would (no shutdown checkpoint). Stopping one that
// is not running is no error.
func (s *Server) Stop() error {
	out, err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	if err != nil && !isNotRunning(out) {
		return fmt.Errorf("stop postgres: %w: %s", err, out)
	}
	return nil
}

// Restart starts the stopped cluster again and waits until it takes connections.
func (s *Server) Restart() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.dir)
	out, err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("start postgres: %w: %s", err, out)
	}
	return nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run runs one of PostgreSQL's programs as the postgres user.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd.CombinedOutput()
}

// isNotRunning reports whether pg_ctl's output says there was no server to stop.
func isNotRunning(out []byte) bool {
	o := string(out)
	return strings.Contains(o, "Is server running?") || strings.Contains(o, "PID file") && strings.Contains(o, "does not exist")
}
