package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDatabase returns HANGAR_TEST_DATABASE_URL, skipping loudly when it is unset (CI always
// sets it, and there a missing server fails the run).
func testDatabase(t *testing.T) string {
	u := os.Getenv("HANGAR_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HANGAR_TEST_DATABASE_URL is not set: CI must provide a PostgreSQL server")
		}
		t.Skip("SKIPPING the PostgreSQL store suite: set HANGAR_TEST_DATABASE_URL to a server's URL to run it")
	}
	return u
}

// freshSchema creates an empty schema for one test and returns a URL whose search_path selects
// it, so tests never see each other's rows.
func freshSchema(t *testing.T, base string) string {
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

func TestStore(t *testing.T) {
	base := testDatabase(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), freshSchema(t, base))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestOpenRefusesBadServer(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	_, err := postgres.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a server that is not there succeeded")
	}
}
