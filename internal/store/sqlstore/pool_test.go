package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/quartz"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/hangar-dev/hangar/internal/store"
)

// testPool is a pool of one connection to a new SQLite file, through OpenDB as the stores
// open theirs, whose calls wait a second of clock's for it.
func testPool(t *testing.T, clock quartz.Clock) *pool {
	t.Helper()
	db, err := OpenDB("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"), store.Unavailable, StmtCacheSize)
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(db, db, Pool{MaxConns: 1, Wait: time.Second, Clock: clock})
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPoolWaitIsBounded: a call that finds the one connection held waits Pool.Wait, then
// fails with store.ErrBusy; once the connection is back, calls get it again.
func TestPoolWaitIsBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clock := quartz.NewMock(t)
	p := testPool(t, clock)
	tx, err := p.BeginTx(ctx, nil) // holds the one connection
	if err != nil {
		t.Fatal(err)
	}
	waits := clock.Trap().AfterFunc("sqlstore", "wait")
	defer waits.Close()
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"a query", func() error { var n int; return p.QueryRowContext(ctx, `SELECT 1`).Scan(&n) }},
		{"an exec", func() error { _, err := p.ExecContext(ctx, `SELECT 1`); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- call.do() }()
		waits.MustWait(ctx).MustRelease(ctx)
		clock.Advance(time.Second).MustWait(ctx)
		if err := <-done; !errors.Is(err, store.ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s beside the held connection, a second on = %v, want store.ErrBusy and store.ErrUnavailable", call.name, err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { var n int; done <- p.QueryRowContext(ctx, `SELECT 1`).Scan(&n) }()
	waits.MustWait(ctx).MustRelease(ctx)
	if err := <-done; err != nil {
		t.Errorf("a query once the connection is back = %v", err)
	}
}

// TestPoolWaitEndsWithTheConnection: the bound is on the wait for a connection only — a call
// that has one runs as long as its own context lets it, its rows readable after the wait's
// time has passed; and a call whose own context ends while it waits says so, not busy.
func TestPoolWaitEndsWithTheConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clock := quartz.NewMock(t)
	p := testPool(t, clock)
	rows, err := p.QueryContext(ctx, `SELECT 1 UNION ALL SELECT 2`)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute).MustWait(ctx) // far past the wait: nothing may fire
	var sum int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Error(err)
		}
		sum += n
	}
	if err := rows.Err(); err != nil || sum != 3 {
		t.Errorf("the rows read after the wait's time = %d, %v; want 3", sum, err)
	}
	rows.Close()

	tx, err := p.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	clock.Advance(time.Minute).MustWait(ctx)
	if _, err := tx.ExecContext(ctx, `SELECT 1`); err != nil {
		t.Errorf("a transaction used after the wait's time = %v", err)
	}
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	if _, err := p.ExecContext(gone, `SELECT 1`); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrBusy) {
		t.Errorf("a call whose context ended = %v, want context.Canceled", err)
	}
}

// TestSplitPoolOneWriter: split (SQLite's shape), the writes go through one connection and
// the reads beside it — a write waits for the writer while a read does not, and the readers
// are bounded by MaxConns.
func TestSplitPoolOneWriter(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dsn := "file:" + filepath.Join(t.TempDir(), "x.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
	w, err := OpenDB("sqlite", dsn+"&_txlock=immediate", store.Unavailable, StmtCacheSize)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenDB("sqlite", dsn+"&_pragma=query_only(1)", store.Unavailable, StmtCacheSize)
	if err != nil {
		t.Fatal(err)
	}
	clock := quartz.NewMock(t)
	p := newPool(w, r, Pool{MaxConns: 3, Wait: time.Second, Clock: clock})
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
	waits := clock.Trap().AfterFunc("sqlstore", "wait") // closed after the two calls
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"a write", func() error { _, err := p.ExecContext(ctx, `INSERT INTO t VALUES (2)`); return err }},
		{"a DELETE ... RETURNING (it writes)", func() error { return p.QueryRowContext(ctx, `DELETE FROM t RETURNING a`).Scan(&n) }},
	} {
		done := make(chan error, 1)
		go func() { done <- call.do() }()
		waits.MustWait(ctx).MustRelease(ctx)
		clock.Advance(time.Second).MustWait(ctx)
		if err := <-done; !errors.Is(err, store.ErrBusy) {
			t.Errorf("%s beside the held writer, a second on = %v, want store.ErrBusy", call.name, err)
		}
	}
	waits.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := p.QueryRowContext(ctx, `DELETE FROM t RETURNING a`).Scan(&n); err != nil || n != 1 {
		t.Errorf("DELETE ... RETURNING = %d, %v; want 1", n, err)
	}
}
