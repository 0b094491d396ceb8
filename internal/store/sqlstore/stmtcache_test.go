package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/hangar-dev/hangar/internal/store"
)

// countingDriver is SQLite's driver, counting what it parses: each statement prepared, and each
// query or exec it is handed as text. Each database's counts are under its DSN in counts.
type countingDriver struct{ base driver.Driver }

type parseCounts struct {
	parses atomic.Int64 // queries parsed: prepared, or run from their text
	open   atomic.Int64 // statements prepared and not yet closed
}

var (
	counts     sync.Map // DSN → *parseCounts
	registered sync.Once
)

func (d countingDriver) Open(dsn string) (driver.Conn, error) {
	c, err := d.base.Open(dsn)
	if err != nil {
		return nil, err
	}
	n, _ := counts.Load(dsn)
	return countingConn{c, n.(*parseCounts)}, nil
}

type countingConn struct {
	driver.Conn
	n *parseCounts
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.n.parses.Add(1)
	c.n.open.Add(1)
	return countingStmt{s, c.n}, nil
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.n.parses.Add(1)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.n.parses.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

type countingStmt struct {
	driver.Stmt
	n *parseCounts
}

func (s countingStmt) Close() error {
	s.n.open.Add(-1)
	return s.Stmt.Close()
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// countingDB is a database of one connection to a new SQLite file through OpenDB, keeping
// cacheStmts statements, with a table t (a INTEGER) of the rows 1, 2, 3; and its counts from
// then on.
func countingDB(t *testing.T, cacheStmts int) (*sql.DB, *parseCounts) {
	t.Helper()
	registered.Do(func() {
		db, err := sql.Open("sqlite", "") // the driver with the functions registered
		if err != nil {
			t.Fatal(err)
		}
		sql.Register("sqlite-counting", countingDriver{db.Driver()})
		db.Close()
	})
	dsn := "file:" + filepath.Join(t.TempDir(), "x.db")
	n := &parseCounts{}
	counts.Store(dsn, n)
	db, err := OpenDB("sqlite-counting", dsn, store.Unavailable, cacheStmts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	n.parses.Store(0)
	return db, n
}

// TestStmtCacheParsesOnce: with a cache, a query sent again is not parsed again, whether read
// or exec; a script (migrations) is parsed each time; without a cache every call parses.
func TestStmtCacheParsesOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		cacheStmts int
		query      string
		want       int64
	}{
		{"a read, cached", StmtCacheSize, `SELECT count(*) FROM t WHERE a >= ?`, 1},
		{"an exec, cached", StmtCacheSize, `UPDATE t SET a = a WHERE a = ?`, 1},
		{"a script, cached", StmtCacheSize, `UPDATE t SET a = a WHERE a = ?; UPDATE t SET a = a WHERE a = ?`, 10},
		{"a read, uncached", 0, `SELECT count(*) FROM t WHERE a >= ?`, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, n := countingDB(t, c.cacheStmts)
			for i := range 10 {
				rows, err := db.Query(c.query, i%3+1)
				if err != nil {
					t.Fatal(err)
				}
				rows.Close()
			}
			if got := n.parses.Load(); got != c.want {
				t.Errorf("10 calls parsed %d times, want %d", got, c.want)
			}
		})
	}
}

// TestStmtCacheBusyFallsBack: a query sent again while its own rows are open (in a
// transaction) runs beside them, each with its own answer.
func TestStmtCacheBusyFallsBack(t *testing.T) {
	t.Parallel()
	db, _ := countingDB(t, StmtCacheSize)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const query = `SELECT a FROM t WHERE a >= ? ORDER BY a`
	rows, err := tx.Query(query, 1)
	if err != nil {
		t.Fatal(err)
	}
	var outer, inner []int
	for rows.Next() {
		var a int
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, a)
		in, err := tx.Query(query, a)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for in.Next() {
			n++
		}
		in.Close()
		inner = append(inner, n)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if !equal(outer, []int{1, 2, 3}) || !equal(inner, []int{3, 2, 1}) {
		t.Errorf("the outer rows = %v, the inner counts = %v; want [1 2 3] and [3 2 1]", outer, inner)
	}
	var n int
	if err := tx.QueryRow(query, 3).Scan(&n); err != nil || n != 3 {
		t.Errorf("the query once its rows closed = %d, %v; want 3", n, err)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStmtCacheBound: past its size the cache closes the statement least recently used, which
// is parsed again when it comes back; a statement in use is not the one closed.
func TestStmtCacheBound(t *testing.T) {
	t.Parallel()
	db, n := countingDB(t, 2)
	open := n.open.Load() // the statements of countingDB's own queries
	if open != 2 {
		t.Fatalf("%d statements open after countingDB's two queries, want 2", open)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	held, err := tx.Query(`SELECT a FROM t`) // busy while open
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SELECT 2`, `SELECT 3`, `SELECT 2`, `SELECT 1 FROM t`} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// SELECT a FROM t (CREATE TABLE evicted), SELECT 2 (INSERT evicted), SELECT 3 (SELECT 2
	// evicted), SELECT 2 (SELECT 3 evicted), SELECT 1 FROM t (SELECT 2 evicted): 5 parses, and
	// 2 statements open.
	if got, open := n.parses.Load(), n.open.Load(); got != 5 || open != 2 {
		t.Errorf("parsed %d times, %d statements open; want 5 and 2", got, open)
	}
	for held.Next() {
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SELECT a FROM t`); err != nil {
		t.Fatal(err)
	}
	if got := n.parses.Load(); got != 5 {
		t.Errorf("the held statement was parsed again (%d parses, want 5): it was evicted while in use", got)
	}
}

// TestStmtCacheClosesWithConn: closing a connection closes the statements it kept.
func TestStmtCacheClosesWithConn(t *testing.T) {
	t.Parallel()
	db, n := countingDB(t, StmtCacheSize)
	for _, q := range []string{`SELECT 1`, `SELECT a FROM t`, `UPDATE t SET a = a`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.open.Load(); got != 5 {
		t.Fatalf("%d statements open, want 5 (the cache's)", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := n.open.Load(); got != 0 {
		t.Errorf("%d statements open after the connection closed, want 0", got)
	}
}

// stepping, when set, is closed by stmtcache_test_stepping the first time SQLite calls it: a
// query that calls it is running.
var stepping atomic.Pointer[chan struct{}]

func init() {
	sqlite.MustRegisterScalarFunction("stmtcache_test_stepping", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if ch := stepping.Swap(nil); ch != nil {
			close(*ch)
		}
		return args[0], nil
	})
}

// TestStmtCacheCancel: a cached statement's query ends with its context, interrupted while
// SQLite runs it, and the statement answers the next call.
func TestStmtCacheCancel(t *testing.T) {
	t.Parallel()
	db, n := countingDB(t, StmtCacheSize)
	const query = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
		SELECT count(stmtcache_test_stepping(x)) FROM c`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	running := make(chan struct{})
	stepping.Store(&running)
	call, stop := context.WithCancel(ctx)
	go func() {
		<-running
		stop()
	}()
	var count int64
	if err := db.QueryRowContext(call, query, math.MaxInt64).Scan(&count); !errors.Is(err, context.Canceled) {
		t.Fatalf("a query cancelled while it runs = %d, %v; want context.Canceled", count, err)
	}
	if err := db.QueryRowContext(ctx, query, 10).Scan(&count); err != nil || count != 10 {
		t.Errorf("the query after the cancelled one = %d, %v; want 10", count, err)
	}
	if got := n.parses.Load(); got != 1 {
		t.Errorf("parsed %d times, want 1 (the statement is reused after the cancel)", got)
	}
}
