package sqlitetest_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSchemaAsMigrated: a copy holds the schema and the migration versions that sqlite.Open
// gives a new data directory.
func TestSchemaAsMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, copied := t.TempDir(), t.TempDir()
	for dir, open := range map[string]func(context.Context, string) (*sqlstore.DB, error){
		want:   func(ctx context.Context, dir string) (*sqlstore.DB, error) { return sqlite.Open(ctx, dir) },
		copied: func(ctx context.Context, dir string) (*sqlstore.DB, error) { return sqlitetest.Open(ctx, dir) },
	} {
		s, err := open(ctx, dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		s.Close()
	}
	w, c := schema(t, want), schema(t, copied)
	if len(w) == 0 || !slices.Equal(w, c) {
		t.Errorf("the copy's schema:\n%q\nwant sqlite.Open's:\n%q", c, w)
	}
}

// TestOpenKeepsADatabase: a data directory that has a database is opened as it is, not
// replaced by the template.
func TestOpenKeepsADatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sqlitetest.Open(ctx, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.EnsureUser(ctx, "ada"); err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	if err := s.CreateToken(ctx, store.Token{ID: "t1", User: "ada", Hash: "h", Hint: "x", Scopes: []string{"user"}}); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	s.Close()
	s, err = sqlitetest.Open(ctx, dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if n, err := s.CountTokens(ctx); err != nil || n != 1 {
		t.Fatalf("CountTokens after reopen = %d, %v; want 1", n, err)
	}
}

// schema lists the tables, indexes and triggers of dir's database and its applied migrations.
func schema(t *testing.T, dir string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.Join(dir, sqlite.FileName)}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	for _, q := range []string{
		`SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`,
		`SELECT 'version ' || version_id || ' ' || is_applied FROM goose_db_version ORDER BY id`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
