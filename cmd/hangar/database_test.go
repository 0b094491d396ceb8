package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/replicas"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// poolServe starts a serve on a fresh PostgreSQL schema, its store's pool bounded so, and
// returns it with what counting its connections needs (storetest.Conns).
func poolServe(t *testing.T, maxConns int, wait time.Duration) (ts *testServer, schema, base, app string) {
	t.Helper()
	base = storetest.PostgresURL(t)
	schema = storetest.FreshSchema(t, base)
	cfg := testConfig(t)
	cfg.DatabaseURL, app = storetest.Tagged(t, schema)
	cfg.DatabaseMaxConns, cfg.DatabaseWait = maxConns, wait
	return startServe(t, cfg), schema, base, app
}

// lockTokens locks the tokens table of the schema at url until the returned func runs (or the
// test ends): every request's token lookup then holds its store connection in the database,
// which fills the pool as surely as a slow database would.
func lockTokens(t *testing.T, url string) (unlock func()) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec(`LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() { tx.Rollback() }
}

// response is what a test keeps of an answer.
type response struct {
	status     int
	retryAfter string
	message    string
	err        error
}

func getSandboxes(url, token string) response {
	req, _ := http.NewRequest("GET", url+"/api/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	return response{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), message: body.Error.Message}
}

// TestBurstStaysWithinThePool: many more concurrent requests than the store has connections
// wait for one in turn and all succeed — the database never sees more than the store's cap and
// the replica's own few, and nobody gets a 500 ("sorry, too many clients" was one when the
// pool had no cap).
func TestBurstStaysWithinThePool(t *testing.T) {
	t.Parallel()
	const maxConns, requests = 3, 60
	ts, schema, base, app := poolServe(t, maxConns, time.Hour) // the burst waits, however slow the machine
	token := adminToken(t, ts)
	unlock := lockTokens(t, schema)
	answers := make(chan response, requests)
	for range requests {
		go func() { answers <- getSandboxes(ts.url, token) }()
	}
	providertest.WaitFor(t, waitTimeout, 10*time.Millisecond, "the store's connections to fill", func() bool {
		_, waiting := storetest.Conns(t, base, app)
		return waiting >= maxConns
	})
	if open, waiting := storetest.Conns(t, base, app); open > maxConns+replicas.MaxConns || waiting > maxConns {
		t.Errorf("during a burst of %d requests the serve holds %d connections (%d of them in queries), want at most %d+%d (%d)",
			requests, open, waiting, maxConns, replicas.MaxConns, maxConns)
	}
	unlock()
	byStatus := map[int]int{}
	for range requests {
		a := <-answers
		if a.err != nil {
			t.Fatalf("GET /api/sandboxes: %v", a.err)
		}
		byStatus[a.status]++
	}
	if byStatus[http.StatusOK] != requests {
		t.Errorf("answers by status %v, want all %d 200", byStatus, requests)
	}
	if open, _ := storetest.Conns(t, base, app); open > maxConns+replicas.MaxConns {
		t.Errorf("after the burst the serve holds %d connections, want at most %d", open, maxConns+replicas.MaxConns)
	}
	m := metricsOf(t, ts)
	for _, want := range []string{`go_sql_max_open_connections{db_name="hangar"} 3`, `go_sql_wait_count_total{db_name="hangar"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(m, `go_sql_wait_count_total{db_name="hangar"} 0`) {
		t.Error("/metrics counts no wait for a connection after a burst that waited")
	}
}

// TestFullPoolAnswers503: a request that waits HANGAR_DATABASE_WAIT for a store connection
// and gets none is answered 503, with Retry-After and a sentence — never a 500 — while those
// holding the connections finish once the database answers them.
func TestFullPoolAnswers503(t *testing.T) {
	t.Parallel()
	const maxConns = 2
	ts, schema, base, app := poolServe(t, maxConns, 2*time.Second) // long enough that a request with a free connection never gives up
	token := adminToken(t, ts)
	unlock := lockTokens(t, schema)
	held := make(chan response, maxConns)
	for range maxConns {
		go func() { held <- getSandboxes(ts.url, token) }()
	}
	providertest.WaitFor(t, waitTimeout, 10*time.Millisecond, "the store's connections to fill", func() bool {
		_, waiting := storetest.Conns(t, base, app)
		return waiting >= maxConns
	})
	// One more: it gives up after the wait — or, from a pool without a cap, takes a
	// connection past it, which waits for the lock beside the others.
	late := make(chan response, 1)
	go func() { late <- getSandboxes(ts.url, token) }()
	var a response
	answered := false
	providertest.WaitFor(t, waitTimeout, 10*time.Millisecond, "the late request's answer, or its connection past the cap", func() bool {
		select {
		case a = <-late:
			answered = true
			return true
		default:
			_, waiting := storetest.Conns(t, base, app)
			return waiting > maxConns
		}
	})
	// A full pool is load, not a fault: the replica stays ready.
	if resp, err := http.Get(ts.url + "/readyz"); err != nil {
		t.Errorf("GET /readyz: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz with every store connection in use = %d, want 200", resp.StatusCode)
		}
	}
	switch {
	case !answered:
		t.Errorf("the late request took a connection past the store's %d", maxConns)
	case a.err != nil:
		t.Fatalf("GET /api/sandboxes: %v", a.err)
	case a.status != http.StatusServiceUnavailable || a.retryAfter == "" || !strings.Contains(a.message, "busy"):
		t.Errorf("the late request = %d (Retry-After %q) %q, want 503 with Retry-After saying the database is busy", a.status, a.retryAfter, a.message)
	}
	unlock()
	for range maxConns {
		if a := <-held; a.err != nil || a.status != http.StatusOK {
			t.Errorf("a request that held a connection = %d %v, want 200 once the database answered", a.status, a.err)
		}
	}
	if !answered {
		<-late
	}
}

// TestServeRefusesNewerSchema: a serve on a database that a newer hangar migrated does not
// start, and says why and what to do.
func TestServeRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DatabaseURL = storetest.FreshSchema(t, storetest.PostgresURL(t))
	startServe(t, cfg).stop(t)
	db, err := sql.Open("pgx", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = serve(context.Background(), cfg, ln, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "the database's schema is at version 9999, newer than this hangar") {
		t.Fatalf("serve on a newer schema = %v, want a refusal naming the version", err)
	}
}

// TestSQLiteOneWriter: on SQLite the serve writes through one connection and reads through
// HANGAR_DATABASE_MAX_CONNS beside it, as /metrics shows.
func TestSQLiteOneWriter(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DatabaseMaxConns = 5
	m := metricsOf(t, startServe(t, cfg))
	for _, want := range []string{`go_sql_max_open_connections{db_name="hangar"} 1`, `go_sql_max_open_connections{db_name="hangar_readers"} 5`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
