// Package postgres opens hangar's store on PostgreSQL through pgx, migrated at open.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/migrations"
)

// Open connects to the database at url and applies the migrations, with the default Pool.
func Open(ctx context.Context, url string) (*sqlstore.DB, error) {
	return OpenPool(ctx, url, sqlstore.Pool{})
}

// OpenPool connects to the database at url, its connections bounded as pool says, and applies
// the migrations under an advisory lock of the schema's own, so that replicas started at once
// on an empty database migrate it once.
func OpenPool(ctx context.Context, url string, pool sqlstore.Pool) (*sqlstore.DB, error) {
	db, err := sqlstore.OpenDB("pgx", url, classify, 0)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s, err := open(ctx, db, pool)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, db *sql.DB, pool sqlstore.Pool) (*sqlstore.DB, error) {
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID(schema)),
		lock.WithLockTimeout(1, uint64(migrationLockWait/time.Second)))
	if err != nil {
		return nil, err
	}
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return nil, err
	}
	return sqlstore.Open(ctx, db, sqlstore.Dialect{Goose: goose.DialectPostgres, Numbered: true,
		IsUniqueViolation: isUniqueViolation, Locker: locker}, fsys, pool)
}

// migrationLockWait bounds how long a hangar waits for another one's migrations: goose's
// locker tries for the lock once a second until then. Migrations take seconds.
const migrationLockWait = 5 * time.Minute

// migrationLockID is the advisory lock held while hangar migrates schema. Advisory locks are
// the database's, not the schema's: a lock of the schema's own lets hangars on other schemas
// of one database (tests run hundreds) migrate at the same time.
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hangar migrations " + schema))
	return int64(h.Sum64())
}

// classify wraps PostgreSQL's disk_full (53100) in store.ErrFull; its too_many_connections
// ("sorry, too many clients already", or a role's connection limit: 53300) in store.ErrBusy
// and store.ErrUnavailable; and in store.ErrUnavailable what says it does not answer: a
// connection that failed or broke (pgconn.ConnectError, class 08), the rest of insufficient
// resources (class 53: no memory), and a server shutting down or starting (57P01-57P03).
func classify(err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &pe) && pe.Code == "53100":
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	case errors.As(err, &pe) && pe.Code == "53300":
		return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, store.ErrBusy, err)
	case errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") ||
		pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case errors.As(err, &ce):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return store.Unavailable(err)
}

// isUniqueViolation reports SQLSTATE 23505, unique_violation.
func isUniqueViolation(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505"
}
