package storetest

import (
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// PostgresURL returns HANGAR_TEST_DATABASE_URL, skipping loudly when it is unset (CI always
// sets it, and there a missing server fails the run).
func PostgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("HANGAR_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HANGAR_TEST_DATABASE_URL is not set: CI must provide a PostgreSQL server")
		}
		t.Skip("SKIPPING the PostgreSQL store suite: set HANGAR_TEST_DATABASE_URL to a server's URL to run it")
	}
	return u
}

// FreshSchema creates an empty schema for one test and returns a URL whose search_path selects
// it, so tests never see each other's rows (and may run in parallel). The test's cleanup drops
// it.
func FreshSchema(t *testing.T, base string) string {
	t.Helper()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", base, err)
	}
	defer db.Close()
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	if _, err := db.Exec(`CREATE SCHEMA "` + schema + `"`); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err == nil {
			db.Exec(`DROP SCHEMA "` + schema + `" CASCADE`)
			db.Close()
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
