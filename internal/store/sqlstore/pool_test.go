package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/hangar-dev/hangar/internal/store"
)

// testPool is a pool of one connection to a new SQLite file, through OpenDB as the stores
// open theirs, whose calls wait wait for it.
func testPool(t *testing.T, wait time.Duration) *pool {
	t.Helper()
	db, err := OpenDB("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"), store.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(db, db, Pool{MaxConns: 1, Wait: wait})
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPoolWaitIsBounded: a call that finds the one connection held waits Pool.Wait, then
// fails with store.ErrBusy; once the connection is back, calls get it again.
func TestPoolWaitIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testPool(t, 20*time.Millisecond)
	tx, err := p.BeginTx(ctx, nil) // holds the one connection
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = p.QueryRowContext(ctx, `SELECT 1`).Scan(&n)
	if !errors.Is(err, store.ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a query beside the held connection = %v, want store.ErrBusy and store.ErrUnavailable", err)
	}
	if _, err := p.ExecContext(ctx, `SELECT 1`); !errors.Is(err, store.ErrBusy) {
		t.Errorf("an exec beside the held connection = %v, want store.ErrBusy", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := p.QueryRowContext(ctx, `SELECT 1`).Scan(&n); err != nil || n != 1 {
		t.Errorf("a query once the connection is back = %d, %v; want 1", n, err)
	}
}

// TestPoolWaitEndsWithTheConnection: the bound is on the wait for a connection only — a call
// that has one runs as long as its own context lets it, here far past the 1 ms wait, and its
// rows stay readable; and a call whose own context ends while it waits says so, not busy.
func TestPoolWaitEndsWithTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testPool(t, time.Millisecond)
	var n int
	slow := `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100000) SELECT COUNT(*) FROM c`
	if err := p.QueryRowContext(ctx, slow).Scan(&n); err != nil || n != 100000 {
		t.Errorf("a slow query = %d, %v; want 100000", n, err)
	}
	rows, err := p.QueryContext(ctx, slow)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			t.Error(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Errorf("the slow query's rows: %v", err)
	}
	rows.Close()

	tx, err := p.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.ExecContext(gone, `SELECT 1`); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrBusy) {
		t.Errorf("a call whose context ended = %v, want context.Canceled", err)
	}
}

// TestSplitPoolOneWriter: split (SQLite's shape), the writes go through one connection and
// the reads beside it — a write waits for the writer while a read does not, and the readers
// are bounded by MaxConns.
func TestSplitPoolOneWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := "file:" + filepath.Join(t.TempDir(), "x.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
	w, err := OpenDB("sqlite", dsn+"&_txlock=immediate", store.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenDB("sqlite", dsn+"&_pragma=query_only(1)", store.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(w, r, Pool{MaxConns: 3, Wait: 20 * time.Millisecond})
	defer p.Close()
	if got := []int{w.Stats().MaxOpenConnections, r.Stats().MaxOpenConnections}; got[0] != 1 || got[1] != 3 {
		t.Errorf("writer and readers capped at %v, want [1 3]", got)
	}
	if _, err := p.ExecContext(ctx, `CREATE TABLE t (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := p.BeginTx(ctx, nil) // holds the writer
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.QueryRowContext(ctx, `  select COUNT(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a read beside the held writer = %d, %v; want 0 (the write is not committed)", n, err)
	}
	if _, err := p.ExecContext(ctx, `INSERT INTO t VALUES (2)`); !errors.Is(err, store.ErrBusy) {
		t.Errorf("a write beside the held writer = %v, want store.ErrBusy", err)
	}
	if err := p.QueryRowContext(ctx, `DELETE FROM t RETURNING a`).Scan(&n); !errors.Is(err, store.ErrBusy) {
		t.Errorf("a DELETE ... RETURNING beside the held writer = %v, want store.ErrBusy: it writes", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := p.QueryRowContext(ctx, `DELETE FROM t RETURNING a`).Scan(&n); err != nil || n != 1 {
		t.Errorf("DELETE ... RETURNING = %d, %v; want 1", n, err)
	}
}
