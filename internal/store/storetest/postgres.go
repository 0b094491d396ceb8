package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// adminTimeout bounds each of the admin connection's statements (a DROP SCHEMA waits for the
// locks of connections still closing).
const adminTimeout = 30 * time.Second

// admin is the one connection of a test binary that creates and drops the tests' schemas and
// counts their connections: starting a connection costs PostgreSQL ~50 ms of CPU here, and a
// connection for each of these statements was two to a dozen per test. mu serializes its use
// (a pgx.Conn serves one statement at a time) and guards conn and url; an idle pgx.Conn runs
// no goroutine, so the connection left open at exit trips no goroutine-leak check.
var admin struct {
	mu   sync.Mutex
	conn *pgx.Conn
	url  string
}

// withAdmin runs fn on the admin connection to base, connecting it first when there is none
// (or it broke, or it is to another server).
func withAdmin(base string, fn func(ctx context.Context, c *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.conn != nil && (admin.conn.IsClosed() || admin.url != base) {
		admin.conn.Close(ctx)
		admin.conn = nil
	}
	if admin.conn == nil {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", base, err)
		}
		admin.conn, admin.url = c, base
	}
	return fn(ctx, admin.conn)
}

// adminExec runs one statement on the admin connection to base.
func adminExec(base, stmt string) error {
	return withAdmin(base, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, stmt)
		return err
	})
}

// FreshSchema creates an empty schema for one test and returns a URL whose search_path selects
// it, so tests never see each other's rows (and may run in parallel). The test's cleanup drops
// it.
func FreshSchema(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	if err := adminExec(base, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if err := adminExec(base, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
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
	err := withAdmin(base, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE wait_event_type = 'Lock') FROM pg_stat_activity WHERE application_name = $1`, name).
			Scan(&open, &waitingForLock)
	})
	if err != nil {
		t.Fatalf("count the connections of %s: %v", name, err)
	}
	return open, waitingForLock
}
