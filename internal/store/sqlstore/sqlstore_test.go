package sqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The shared suite runs here over SQLite too, so sqlstore's own coverage counts what it
// exercises; sqlite and postgres run it for their Open (SQLite's migrating each store: here
// each starts from sqlitetest's migrated template, which also shows that each copy is a whole
// store). PostgreSQL's runs once, in its package: each of its stores is a schema migrated anew.

func TestSuiteSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlitetest.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// TestOpenReportsBadMigrations: a migration the database refuses fails Open with an error that
// says so, and leaves the database to the caller.
func TestOpenReportsBadMigrations(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/x.db")
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	fsys := fstest.MapFS{"00001_bad.sql": {Data: []byte("-- +goose Up\nTHIS IS NOT SQL;\n")}}
	_, err = sqlstore.Open(context.Background(), db, sqlstore.Dialect{Goose: goose.DialectSQLite3}, fsys, sqlstore.Pool{})
	if err == nil || !strings.Contains(err.Error(), "apply migrations") {
		t.Fatalf("Open = %v, want an error applying migrations", err)
	}
	if err := db.Ping(); err != nil {
		t.Errorf("the database was closed by a failed Open: %v", err)
	}
}
