package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
)

// StmtCacheSize is what SQLite's OpenDB calls pass as cacheStmts: the statements one
// connection keeps prepared. sqlstore sends about 80 different queries, SELECTs to the readers
// and the rest (with the reads made inside transactions) to the writer, so each connection's
// share fits and, once warm, nothing is parsed again. The bound keeps a query whose text
// varies (a list of placeholders as long as its arguments) from holding statements without
// end: past it the least recently used one goes (found by a scan, at a miss only). A prepared
// statement holds 7 to 35 KiB of SQLite's memory (sqlite.DBStatusStmtUsed; GetTurn's, with its
// many columns, the most), so a connection holds some hundreds of KiB, a few MiB in all.
const StmtCacheSize = 64

// stmtCache is a connection's prepared statements, keyed by their query's text, that its
// ExecContext and QueryContext use instead of preparing the query again. database/sql calls a
// connection, and the rows it returned, one call at a time, so the cache has no lock of its
// own.
type stmtCache struct {
	size int
	byQ  map[string]*cachedStmt
	uses uint64                                                       // counts the calls
	prep func(ctx context.Context, query string) (driver.Stmt, error) // the driver's
}

// cachedStmt is one statement of a stmtCache. A statement serves one call at a time: busy
// while the rows of a query made with it are open (an exec resets it before returning).
type cachedStmt struct {
	query string
	s     driver.Stmt
	q     driver.StmtQueryContext
	e     driver.StmtExecContext
	busy  bool
	used  uint64 // the cache's uses at its last use
}

func newStmtCache(size int, prep func(ctx context.Context, query string) (driver.Stmt, error)) *stmtCache {
	return &stmtCache{size: size, byQ: make(map[string]*cachedStmt), prep: prep}
}

// get is query's statement, prepared now unless the cache has it, or nil (and no error) when
// the call must prepare its own: the statement is busy, the cache is full of busy ones, or
// query is a script (a ';' in its text: the driver parses a script anew at each run, and
// migrations are run once). A driver whose statement cannot take a context gets nil too.
func (c *stmtCache) get(ctx context.Context, query string) (*cachedStmt, error) {
	if strings.Contains(query, ";") {
		return nil, nil
	}
	c.uses++
	if cs, ok := c.byQ[query]; ok {
		if cs.busy {
			return nil, nil
		}
		cs.used = c.uses
		return cs, nil
	}
	if len(c.byQ) >= c.size && !c.evict() {
		return nil, nil
	}
	s, err := c.prep(ctx, query)
	if err != nil {
		return nil, err
	}
	q, qok := s.(driver.StmtQueryContext)
	e, eok := s.(driver.StmtExecContext)
	if !qok || !eok {
		s.Close()
		return nil, nil
	}
	cs := &cachedStmt{query: query, s: s, q: q, e: e, used: c.uses}
	c.byQ[query] = cs
	return cs, nil
}

// evict closes the least recently used statement that is not busy, and reports whether there
// was one.
func (c *stmtCache) evict() bool {
	var old *cachedStmt
	for _, cs := range c.byQ {
		if !cs.busy && (old == nil || cs.used < old.used) {
			old = cs
		}
	}
	if old == nil {
		return false
	}
	delete(c.byQ, old.query)
	old.s.Close() // reset after each use, it finalizes without error
	return true
}

// close closes every statement; the connection closes next.
func (c *stmtCache) close() error {
	var err error
	for _, cs := range c.byQ {
		err = errors.Join(err, cs.s.Close())
	}
	clear(c.byQ)
	return err
}
