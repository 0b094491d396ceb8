package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hangar-dev/hangar/internal/store"
)

// Pool bounds a store's connections to its database.
type Pool struct {
	// MaxConns caps the connections open at once, in use and idle (HANGAR_DATABASE_MAX_CONNS):
	// all of them, or (OpenSplit) the readers', beside the writer's one. A call that finds
	// them all in use waits for one to come back. They are all kept open when idle. Default
	// DefaultMaxConns.
	MaxConns int
	// Wait bounds how long a call waits for a connection when all MaxConns are in use
	// (HANGAR_DATABASE_WAIT); past it the call fails with store.ErrBusy (and
	// store.ErrUnavailable), which a client sees as 503 with Retry-After. Default DefaultWait.
	Wait time.Duration
	// Clock times the waits (its AfterFunc, tagged "sqlstore", "wait") and stamps new users.
	// Default the real clock.
	Clock quartz.Clock
}

// DefaultMaxConns is Pool.MaxConns's default: with the replicas' own few (replicas.MaxConns),
// two replicas fit the 22 connections a db-f1-micro Cloud SQL instance leaves its users, and
// eight fit a server of 100 (docs/deploy.md).
const DefaultMaxConns = 7

// DefaultWait is Pool.Wait's default: a burst that holds every connection passes in well under
// it, while a client still hears within a few seconds that the database cannot keep up.
const DefaultWait = 5 * time.Second

func (p Pool) withDefaults() Pool {
	if p.MaxConns <= 0 {
		p.MaxConns = DefaultMaxConns
	}
	if p.Wait <= 0 {
		p.Wait = DefaultWait
	}
	if p.Clock == nil {
		p.Clock = quartz.NewReal()
	}
	return p
}

// pool is the connections that the store's own calls go through: one *sql.DB, or with SQLite
// two — a writer of one connection and the readers (see OpenSplit). database/sql caps the
// connections (SetMaxOpenConns) and queues the calls that find them all in use, in order, but
// lets each wait as long as its context lets it; pool bounds that wait. Each call runs under a
// waitCtx that ends the wait after Pool.Wait and is disarmed by the first thing the driver is
// asked on the connection database/sql hands the call (see disarm, called by conn and
// connector): from then on the call runs under its own context alone, however long it takes.
type pool struct {
	w     *sql.DB // statements, transactions, and queries that write
	r     *sql.DB // queries that only read (SELECT); w itself unless split
	wait  time.Duration
	clock quartz.Clock
}

func newPool(writer, readers *sql.DB, p Pool) *pool {
	p = p.withDefaults()
	if writer == readers {
		writer.SetMaxOpenConns(p.MaxConns)
		writer.SetMaxIdleConns(p.MaxConns)
		return &pool{w: writer, r: writer, wait: p.Wait, clock: p.Clock}
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	readers.SetMaxOpenConns(p.MaxConns)
	readers.SetMaxIdleConns(p.MaxConns)
	return &pool{w: writer, r: readers, wait: p.Wait, clock: p.Clock}
}

// of is the database a query goes to: the readers for a SELECT, else the writer (an UPDATE
// ... RETURNING, a DELETE ... RETURNING).
func (p *pool) of(query string) *sql.DB {
	q := strings.TrimSpace(query)
	if len(q) >= 6 && strings.EqualFold(q[:6], "SELECT") {
		return p.r
	}
	return p.w
}

func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	w := p.waitCtx(ctx)
	defer w.disarm()
	return p.w.ExecContext(w, query, args...)
}

func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	w := p.waitCtx(ctx)
	defer w.disarm()
	return p.of(query).QueryContext(w, query, args...)
}

func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	w := p.waitCtx(ctx)
	defer w.disarm()
	return p.of(query).QueryRowContext(w, query, args...)
}

func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	w := p.waitCtx(ctx)
	defer w.disarm()
	return p.w.BeginTx(w, opts)
}

// PingContext waits for a connection no longer than half of what ctx leaves it, so that a
// full pool says so (store.ErrBusy) before ctx ends, rather than looking like a database that
// does not answer.
func (p *pool) PingContext(ctx context.Context) error {
	wait := p.wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2) // a context's deadline is real time
	}
	w := p.waitFor(ctx, wait)
	defer w.disarm()
	return p.r.PingContext(w)
}

func (p *pool) Close() error {
	err := p.w.Close()
	if p.r != p.w {
		err = errors.Join(err, p.r.Close())
	}
	return err
}

// The states of a waitCtx.
const (
	waiting int32 = iota
	expired
	disarmed
)

// waitCtx is a call's context while it waits for a connection: done closes when the wait
// passes its bound or the call's context ends. Once disarmed it is the call's context again.
// It registers nothing with the call's context that outlives the call (a long-lived context
// would keep every call's otherwise).
type waitCtx struct {
	context.Context // the call's own
	wait            time.Duration
	state           atomic.Int32
	done            chan struct{}
	closeDone       sync.Once
	timer           *quartz.Timer
	stopAfter       func() bool // stops the context.AfterFunc on the call's context
}

type waitKey struct{}

func (p *pool) waitCtx(ctx context.Context) *waitCtx { return p.waitFor(ctx, p.wait) }

func (p *pool) waitFor(ctx context.Context, wait time.Duration) *waitCtx {
	w := &waitCtx{Context: ctx, wait: wait, done: make(chan struct{})}
	w.stopAfter = context.AfterFunc(ctx, func() { w.closeDone.Do(func() { close(w.done) }) })
	w.timer = p.clock.AfterFunc(wait, func() {
		if w.state.CompareAndSwap(waiting, expired) {
			w.closeDone.Do(func() { close(w.done) })
		}
	}, "sqlstore", "wait")
	return w
}

// disarm ends the wait: the call has its connection, or is over. A wait that expired stays
// so. Either way nothing of w stays registered with the call's context or the timers.
func (w *waitCtx) disarm() {
	w.state.CompareAndSwap(waiting, disarmed)
	w.timer.Stop()
	w.stopAfter()
}

func (w *waitCtx) Done() <-chan struct{} {
	if w.state.Load() == disarmed {
		return w.Context.Done()
	}
	return w.done
}

func (w *waitCtx) Err() error {
	switch w.state.Load() {
	case disarmed:
		return w.Context.Err()
	case expired:
		return &busyError{wait: w.wait}
	}
	select {
	case <-w.done:
		return w.Context.Err()
	default:
		return nil
	}
}

func (w *waitCtx) Value(key any) any {
	if key == (waitKey{}) {
		return w
	}
	return w.Context.Value(key)
}

// disarm ends the wait of ctx's call, if it is one of pool's: the driver was asked something
// on the call's connection, so the call has it.
func disarm(ctx context.Context) {
	if w, ok := ctx.Value(waitKey{}).(*waitCtx); ok {
		w.disarm()
	}
}

// busyError is a call's context's error once it waited its bound for a connection: it is
// store.ErrBusy and store.ErrUnavailable, and context.DeadlineExceeded to database/sql and
// the drivers, as the error of a context that ended must be.
type busyError struct{ wait time.Duration }

func (e *busyError) Error() string {
	return fmt.Sprintf("%v: waited %v for one (HANGAR_DATABASE_MAX_CONNS, HANGAR_DATABASE_WAIT)", store.ErrBusy, e.wait)
}

func (e *busyError) Is(target error) bool {
	return target == store.ErrBusy || target == store.ErrUnavailable || target == context.DeadlineExceeded
}

// Unwrap gives store.ErrBusy, which says what the error means to a client (problem.Of walks
// what errors wrap; it does not ask Is).
func (e *busyError) Unwrap() error { return store.ErrBusy }

// Collectors export the pool's numbers (database/sql's DBStats: connections open, in use and
// idle, the cap, how often and how long calls waited for one) as go_sql_* metrics, with
// db_name "hangar" — all of the connections, or split the writer's — and "hangar_readers".
func (s *DB) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{collectors.NewDBStatsCollector(s.db.w, "hangar")}
	if s.db.r != s.db.w {
		cs = append(cs, collectors.NewDBStatsCollector(s.db.r, "hangar_readers"))
	}
	return cs
}
