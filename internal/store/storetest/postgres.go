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

// Tagged returns url with an application_name of its own, which the database's
// pg_stat_activity shows for each of the connections made through it (Conns counts them).
func Tagged(t *testing.T, u string) (tagged, name string) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	name = "hangar_test_" + strings.ToLower(rand.Text()[:12])
	q := pu.Query()
	q.Set("application_name", name)
	pu.RawQuery = q.Encode()
	return pu.String(), name
}

// Conns counts the connections to the database at base whose application_name is name (see
// Tagged): all of them, and those waiting for a lock.
func Conns(t *testing.T, base, name string) (open, waitingForLock int) {
	t.Helper()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", base, err)
	}
	defer db.Close()
	err = db.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity WHERE application_name = $1`, name).
		Scan(&open, &waitingForLock)
	if err != nil {
		t.Fatalf("count the connections of %s: %v", name, err)
	}
	return open, waitingForLock
}
