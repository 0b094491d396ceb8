package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
)

// OpenDB is sql.Open of driverName and dsn with every error of the driver passed through
// classify first: a database's way of saying it does not answer or its disk is full becomes
// store.ErrUnavailable or store.ErrFull (classify wraps err in one, keeping err), so whatever
// hangar asked of its store, the answer says what is missing. classify returns err itself for
// everything else. database/sql's own sentinels (driver.ErrSkip, io.EOF, driver.ErrBadConn,
// which it compares or retries on) never reach classify.
//
// cacheStmts > 0 has each connection keep up to that many statements prepared (see stmtCache
// and StmtCacheSize), so that a query sent again is not parsed again: SQLite's driver parses
// each query anew. 0 prepares every query at each call, as pgx's stdlib wants (it keeps its own
// statements per connection).
func OpenDB(driverName, dsn string, classify func(error) error, cacheStmts int) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := db.Driver()
	db.Close()
	dc, ok := drv.(driver.DriverContext)
	if !ok {
		return sql.OpenDB(connector{dsnConnector{dsn, drv}, classify, cacheStmts}), nil
	}
	c, err := dc.OpenConnector(dsn)
	if err != nil {
		return nil, classify(err)
	}
	return sql.OpenDB(connector{c, classify, cacheStmts}), nil
}

// dsnConnector is the connector of a driver that has none of its own (modernc's SQLite), as
// database/sql makes one.
type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// wrap is classify for what database/sql leaves alone.
func wrap(classify func(error) error, err error) error {
	if err == nil || err == driver.ErrSkip || err == io.EOF || err == driver.ErrRemoveArgument || errors.Is(err, driver.ErrBadConn) {
		return err
	}
	return classify(err)
}

type connector struct {
	driver.Connector
	classify   func(error) error
	cacheStmts int
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	disarm(ctx) // the pool had room: the call has its connection once it is made
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		if errors.Is(err, driver.ErrBadConn) {
			return nil, err
		}
		return nil, c.classify(err)
	}
	w := &conn{c: cn, classify: c.classify}
	if c.cacheStmts > 0 {
		w.stmts = newStmtCache(c.cacheStmts, w.prepare)
	}
	return w, nil
}

// conn passes each call on to the driver's connection, asking for the optional interfaces
// database/sql uses; where the driver lacks one it answers as database/sql expects of a driver
// without it (driver.ErrSkip, or the plain method). The first call with a context that pool
// made ends that call's wait for a connection (disarm). Its ExecContext and QueryContext run
// a query with a statement of stmts when it has one.
type conn struct {
	c        driver.Conn
	classify func(error) error
	stmts    *stmtCache // nil: each call prepares its query
}

var (
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

func (c *conn) err(err error) error { return wrap(c.classify, err) }

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	disarm(ctx)
	st, err := c.prepare(ctx, query)
	if err != nil {
		return nil, c.err(err)
	}
	return &stmt{st, c.classify}, nil
}

// prepare is the driver's statement, its errors unclassified.
func (c *conn) prepare(ctx context.Context, query string) (driver.Stmt, error) {
	if pc, ok := c.c.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, query)
	}
	return c.c.Prepare(query)
}

// cached is query's statement from stmts, or nil when the call prepares its own.
func (c *conn) cached(ctx context.Context, query string) (*cachedStmt, error) {
	if c.stmts == nil {
		return nil, nil
	}
	return c.stmts.get(ctx, query)
}

func (c *conn) Close() error {
	var err error
	if c.stmts != nil {
		err = c.stmts.close()
	}
	return c.err(errors.Join(err, c.c.Close()))
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	disarm(ctx)
	var t driver.Tx
	var err error
	if bt, ok := c.c.(driver.ConnBeginTx); ok {
		t, err = bt.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 the driver has no BeginTx
		t, err = c.c.Begin()
	}
	if err != nil {
		return nil, c.err(err)
	}
	return tx{t, c.classify}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	disarm(ctx)
	cs, err := c.cached(ctx, query)
	if err != nil {
		return nil, c.err(err)
	}
	if cs != nil {
		r, err := cs.e.ExecContext(ctx, args)
		return r, c.err(err)
	}
	ec, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := ec.ExecContext(ctx, query, args)
	return r, c.err(err)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	disarm(ctx)
	cs, err := c.cached(ctx, query)
	if err != nil {
		return nil, c.err(err)
	}
	if cs != nil {
		r, err := cs.q.QueryContext(ctx, args)
		if err != nil {
			return nil, c.err(err)
		}
		cs.busy = true
		return &rows{r, c.classify, cs}, nil
	}
	qc, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := qc.QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.err(err)
	}
	return &rows{r, c.classify, nil}, nil
}

func (c *conn) Ping(ctx context.Context) error {
	disarm(ctx)
	if p, ok := c.c.(driver.Pinger); ok {
		return c.err(p.Ping(ctx))
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	disarm(ctx)
	if r, ok := c.c.(driver.SessionResetter); ok {
		return c.err(r.ResetSession(ctx))
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.c.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type stmt struct {
	s        driver.Stmt
	classify func(error) error
}

var (
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
)

func (s *stmt) err(err error) error { return wrap(s.classify, err) }
func (s *stmt) Close() error        { return s.err(s.s.Close()) }
func (s *stmt) NumInput() int       { return s.s.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	//lint:ignore SA1019 database/sql calls it only for drivers without ExecContext
	r, err := s.s.Exec(args)
	return r, s.err(err)
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	//lint:ignore SA1019 database/sql calls it only for drivers without QueryContext
	r, err := s.s.Query(args)
	if err != nil {
		return nil, s.err(err)
	}
	return &rows{r, s.classify, nil}, nil
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	ec, ok := s.s.(driver.StmtExecContext)
	if !ok {
		return s.Exec(values(args))
	}
	r, err := ec.ExecContext(ctx, args)
	return r, s.err(err)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := s.s.(driver.StmtQueryContext)
	if !ok {
		return s.Query(values(args))
	}
	r, err := qc.QueryContext(ctx, args)
	if err != nil {
		return nil, s.err(err)
	}
	return &rows{r, s.classify, nil}, nil
}

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.s.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

type rows struct {
	r        driver.Rows
	classify func(error) error
	cs       *cachedStmt // the statement the rows hold busy, if cached
}

func (r *rows) Columns() []string { return r.r.Columns() }

// Close resets the rows' statement (the driver's rows do), so a cached one is free again.
func (r *rows) Close() error {
	err := r.r.Close()
	if r.cs != nil {
		r.cs.busy = false
	}
	return wrap(r.classify, err)
}

func (r *rows) Next(dest []driver.Value) error { return wrap(r.classify, r.r.Next(dest)) }

type tx struct {
	t        driver.Tx
	classify func(error) error
}

func (t tx) Commit() error   { return wrap(t.classify, t.t.Commit()) }
func (t tx) Rollback() error { return wrap(t.classify, t.t.Rollback()) }
