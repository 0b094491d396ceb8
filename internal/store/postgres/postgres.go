// Package postgres opens hangar's store on PostgreSQL through pgx, migrated at open.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/migrations"
)

// Open connects to the database at url and applies the migrations.
func Open(ctx context.Context, url string) (*sqlstore.DB, error) {
	db, err := sqlstore.OpenDB("pgx", url, classify)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		db.Close()
		return nil, err
	}
	s, err := sqlstore.Open(ctx, db, sqlstore.Dialect{Goose: goose.DialectPostgres, Numbered: true, IsUniqueViolation: isUniqueViolation}, fsys)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// classify wraps PostgreSQL's disk_full (53100) in store.ErrFull, and in store.ErrUnavailable
// what says it does not answer: a connection that failed or broke (pgconn.ConnectError, class
// 08), insufficient resources (class 53: no memory, too many connections), and a server
// shutting down or starting (57P01-57P03).
func classify(err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &pe) && pe.Code == "53100":
		return fmt.Errorf("%w: %w", store.ErrFull, err)
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
