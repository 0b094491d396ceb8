// Package postgres opens hangar's store on PostgreSQL through pgx, migrated at open.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/migrations"
)

// Open connects to the database at url and applies the migrations.
func Open(ctx context.Context, url string) (*sqlstore.DB, error) {
	db, err := sql.Open("pgx", url)
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

// isUniqueViolation reports SQLSTATE 23505, unique_violation.
func isUniqueViolation(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505"
}
