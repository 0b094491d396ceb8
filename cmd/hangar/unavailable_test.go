package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// answer is a response's status, Retry-After and body.
type answer struct {
	status     int
	retryAfter string
	body       string
}

func (ts *testServer) ask(t *testing.T, method, path, token, body string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, ts.url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
}

// wantUnavailable checks a is a 503 with a Retry-After and the sentence says.
func wantUnavailable(t *testing.T, what string, a answer, says string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || !strings.Contains(a.body, says) {
		t.Errorf("%s = %d (Retry-After %q) %s, want 503 with Retry-After saying %q", what, a.status, a.retryAfter, a.body, says)
	}
}

// TestFullDiskIs503: SQLite on a small tmpfs that fills. Writes answer 503 "hangar's disk is
// full" with Retry-After (never 500), reads still answer, /readyz is 503 saying so; space freed,
// all is well again.
func TestFullDiskIs503(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: mounting a small tmpfs to fill needs root")
	}
	cfg := testConfig(t)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", cfg.DataDir, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("SKIPPING: mount a tmpfs at %s: %v", cfg.DataDir, err)
	}
	t.Cleanup(func() { syscall.Unmount(cfg.DataDir, syscall.MNT_DETACH) }) // after the server stops (cleanups run last in, first out)
	ts := startServe(t, cfg)
	admin := adminToken(t, ts)
	if a := ts.ask(t, "GET", "/readyz", "", ""); a.status != http.StatusOK {
		t.Fatalf("/readyz before the disk fills = %d %s", a.status, a.body)
	}
	filler := filepath.Join(cfg.DataDir, "filler")
	fill(t, filler)

	// SQLite may still have room in pages it has (its WAL is reused), so write until a write
	// needs a new block: none of the answers may be a 500.
	full := false
	for i := 0; i < 500 && !full; i++ {
		a := ts.ask(t, "POST", "/api/tokens", admin, fmt.Sprintf(`{"user": "u%d", "scopes": ["user"], "description": %q}`, i, strings.Repeat("x", 900)))
		switch a.status {
		case http.StatusCreated:
		case http.StatusServiceUnavailable:
			wantUnavailable(t, "POST /api/tokens on a full disk", a, "hangar's disk is full")
			full = true
		default:
			t.Fatalf("POST /api/tokens on a full disk = %d %s, want 201 or 503", a.status, a.body)
		}
	}
	if !full {
		t.Fatal("500 writes on a full disk all succeeded")
	}
	if a := ts.ask(t, "GET", "/api/tokens", admin, ""); a.status != http.StatusOK {
		t.Errorf("a read on a full disk = %d %s, want 200", a.status, a.body)
	}
	wantUnavailable(t, "/readyz on a full disk", ts.ask(t, "GET", "/readyz", "", ""), "hangar's disk is full")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if a := ts.ask(t, "GET", "/readyz", "", ""); a.status != http.StatusOK {
		t.Errorf("/readyz with space again = %d %s", a.status, a.body)
	}
	if a := ts.ask(t, "POST", "/api/tokens", admin, `{"user": "after", "scopes": ["user"]}`); a.status != http.StatusCreated {
		t.Errorf("a write with space again = %d %s", a.status, a.body)
	}
}

// fill writes path until its file system has no block left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}

// pgBin is where Debian's PostgreSQL 15 keeps its programs.
const pgBin = "/usr/lib/postgresql/15/bin"

// postgresServer is a PostgreSQL of the test's own, on a free loopback port, run as the
// postgres user (it refuses root).
type postgresServer struct {
	dir, port string
}

// newPostgres makes a cluster in a temporary directory and starts it, or skips t loudly when
// this machine cannot (no PostgreSQL 15 programs, no postgres user, not root).
func newPostgres(t *testing.T) *postgresServer {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		t.Skipf("SKIPPING: needs PostgreSQL's programs in %s: %v", pgBin, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: starting a PostgreSQL of the test's own needs root (to run it as the postgres user)")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("SKIPPING: needs a postgres user: %v", err)
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
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	pg := &postgresServer{dir: filepath.Join(dir, "data"), port: port}
	pg.run(t, "initdb", "-D", pg.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8")
	pg.start(t)
	t.Cleanup(func() { pg.run(t, "pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "stop") })
	return pg
}

func (pg *postgresServer) url() string {
	return "postgres://postgres@127.0.0.1:" + pg.port + "/postgres?sslmode=disable"
}

// start starts the server and waits (pg_ctl -w) until it takes connections.
func (pg *postgresServer) start(t *testing.T) {
	t.Helper()
	pg.run(t, "pg_ctl", "-D", pg.dir, "-l", pg.dir+"/../log", "-w", "-t", "60",
		"-o", "-h 127.0.0.1 -p "+pg.port+" -k "+filepath.Dir(pg.dir), "start")
}

// stop stops the server at once, as a crash would (no shutdown checkpoint).
func (pg *postgresServer) stop(t *testing.T) {
	t.Helper()
	pg.run(t, "pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "stop")
}

func (pg *postgresServer) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pgBin, prog)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil && !(prog == "pg_ctl" && strings.Contains(string(out), "Is server running?")) {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
}

// TestStoppedDatabaseIs503: hangar on a PostgreSQL that stops under it answers every request
// that needs the database 503 "hangar's database does not answer" with Retry-After (never
// 500), /readyz 503 saying so; once it is back, hangar serves again without a restart.
func TestStoppedDatabaseIs503(t *testing.T) {
	pg := newPostgres(t)
	cfg := testConfig(t)
	cfg.DatabaseURL = pg.url()
	ts := startServe(t, cfg)
	admin := adminToken(t, ts)
	if a := ts.ask(t, "GET", "/api/tokens", admin, ""); a.status != http.StatusOK {
		t.Fatalf("GET /api/tokens = %d %s", a.status, a.body)
	}
	pg.stop(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/tokens", ""},
		{"POST", "/api/tokens", `{"user": "ada", "scopes": ["user"]}`},
		{"GET", "/api/sandboxes", ""},
		{"GET", "/api/sessions", ""},
		{"POST", "/mcp", `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}`},
	} {
		wantUnavailable(t, c.method+" "+c.path+" with the database stopped", ts.ask(t, c.method, c.path, admin, c.body), "hangar's database does not answer")
	}
	wantUnavailable(t, "/readyz with the database stopped", ts.ask(t, "GET", "/readyz", "", ""), "hangar's database does not answer")

	pg.start(t)
	// A real database's return has no event to wait on: poll, with a deadline.
	var last answer
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		last = ts.ask(t, "GET", "/api/tokens", admin, "")
		if last.status != http.StatusOK && last.status != http.StatusServiceUnavailable {
			return false, fmt.Errorf("%d %s", last.status, last.body)
		}
		return last.status == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("GET /api/tokens after the database came back: %v (last %d %s)", err, last.status, last.body)
	}
	if a := ts.ask(t, "GET", "/readyz", "", ""); a.status != http.StatusOK {
		t.Errorf("/readyz after the database came back = %d %s", a.status, a.body)
	}
}
