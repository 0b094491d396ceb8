package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hangar-dev/hangar/internal/store/postgres/pgtest"
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

// TestStoppedDatabaseIs503: hangar on a PostgreSQL that stops under it answers every request
// that needs the database 503 "hangar's database does not answer" with Retry-After (never
// 500), /readyz 503 saying so; once it is back, hangar serves again without a restart.
func TestStoppedDatabaseIs503(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := testConfig(t)
	cfg.DatabaseURL = pg.URL()
	ts := startServe(t, cfg)
	admin := adminToken(t, ts)
	if a := ts.ask(t, "GET", "/api/tokens", admin, ""); a.status != http.StatusOK {
		t.Fatalf("GET /api/tokens = %d %s", a.status, a.body)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
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

	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
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
