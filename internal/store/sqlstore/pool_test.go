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
	p := newPool(db, Pool{MaxConns: 1, Wait: wait})
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
