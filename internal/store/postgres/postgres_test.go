package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	t.Parallel()
	base := storetest.PostgresURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), storetest.FreshSchema(t, base))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestOpenRefusesBadServer(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: nothing listens there.
	_, err := postgres.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a server that is not there succeeded")
	}
}

// TestConcurrentFirstOpens: replicas started at once on an empty schema all migrate it and
// start — one applies the migrations under the lock, the others find them applied. Without the
// lock two CREATE TABLEs of one name race, and the loser fails with duplicate key ...
// pg_type_typname_nsp_index.
func TestConcurrentFirstOpens(t *testing.T) {
	t.Parallel()
	url := storetest.FreshSchema(t, storetest.PostgresURL(t))
	const replicas = 4
	errs := make(chan error, replicas)
	var ready sync.WaitGroup
	ready.Add(replicas)
	start := make(chan struct{})
	for range replicas {
		go func() {
			ready.Done()
			<-start
			s, err := postgres.Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	ready.Wait()
	close(start)
	for range replicas {
		if err := <-errs; err != nil {
			t.Errorf("Open beside %d others on an empty schema: %v", replicas-1, err)
		}
	}
}

// TestOpenRefusesNewerSchema: a database a newer hangar migrated (a version this one lacks) is
// refused with a sentence that says what to do, not used by a hangar that does not know its
// tables.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	url := storetest.FreshSchema(t, storetest.PostgresURL(t))
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(context.Background(), url)
	var newer *sqlstore.NewerSchemaError
	if !errors.As(err, &newer) || newer.At != 9999 || newer.Knows >= 9999 {
		t.Fatalf("Open of a newer schema = %v, want a NewerSchemaError at 9999", err)
	}
	for _, want := range []string{"at version 9999", "newer than this hangar", "run the newer hangar"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// TestFullPoolWaitsThenIsBusy: a call that finds every one of the pool's connections in use
// waits for one up to Pool.Wait, then fails with store.ErrBusy (a 503 to a client, never a
// 500); the database never sees more than MaxConns of the store's connections. The pool is
// made full deterministically: the tokens table is locked, so each token lookup holds its
// connection in the database until the lock goes.
func TestFullPoolWaitsThenIsBusy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	base := storetest.PostgresURL(t)
	schema := storetest.FreshSchema(t, base)
	url, app := storetest.Tagged(t, schema)
	const maxConns = 2
	clock := quartz.NewMock(t)
	s, err := postgres.OpenPool(ctx, url, sqlstore.Pool{MaxConns: maxConns, Wait: time.Second, Clock: clock})
	if err != nil {
		t.Fatalf("OpenPool: %v", err)
	}
	defer s.Close()

	locker, err := sql.Open("pgx", schema) // not tagged: not one of the store's
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, maxConns)
	for range maxConns {
		go func() { _, err := s.TokenByHash(ctx, "nothing"); held <- err }()
	}
	providertest.WaitFor(t, waitTimeout, 10*time.Millisecond, "every connection of the pool to wait for the lock", func() bool {
		_, waiting := storetest.Conns(t, base, app)
		return waiting == maxConns
	})

	// One more lookup waits for a connection, and gives up: or, from a pool without a cap,
	// opens one more, which waits for the lock beside the others.
	waits := clock.Trap().AfterFunc("sqlstore", "wait") // closed once it caught the one call
	busy := make(chan error, 1)
	go func() { _, err := s.TokenByHash(ctx, "nothing"); busy <- err }()
	waits.MustWait(ctx).MustRelease(ctx)
	waits.Close()
	clock.Advance(time.Second).MustWait(ctx)
	err = nil
	providertest.WaitFor(t, waitTimeout, 10*time.Millisecond, "the lookup to give up, or to open a connection past the cap", func() bool {
		select {
		case err = <-busy:
			return true
		default:
			_, waiting := storetest.Conns(t, base, app)
			return waiting > maxConns
		}
	})
	if open, _ := storetest.Conns(t, base, app); open > maxConns {
		t.Errorf("the store holds %d connections, more than its %d", open, maxConns)
	}
	if !errors.Is(err, store.ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a lookup beside %d held connections = %v, want store.ErrBusy and store.ErrUnavailable", maxConns, err)
	}
	if err != nil && !strings.Contains(err.Error(), "HANGAR_DATABASE_MAX_CONNS") {
		t.Errorf("the error %q does not name the setting", err)
	}

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err == nil { // it took a connection past the cap
		<-busy
	}
	for range maxConns {
		if err := <-held; !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a lookup that held a connection = %v, want store.ErrNotFound once the lock went", err)
		}
	}
	// The pool is whole again: the next call gets a connection at once.
	if _, err := s.TokenByHash(ctx, "nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a lookup after the burst = %v, want store.ErrNotFound", err)
	}
}

// waitTimeout bounds a wait for the database to reach a state the test made.
const waitTimeout = 20 * time.Second

// TestTooManyClientsIsBusy: PostgreSQL's own refusal of one more connection (too_many_connections,
// 53300: "sorry, too many clients already", or a role's connection limit) is store.ErrBusy —
// a 503 with Retry-After to a client, not a 500.
func TestTooManyClientsIsBusy(t *testing.T) {
	t.Parallel()
	base := storetest.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	role := "hangar_full_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))[:8] + "_" + strings.ToLower(rand.Text()[:8])
	if _, err := admin.Exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'full' CONNECTION LIMIT 0`); err != nil {
		t.Fatalf("create a role that may not connect: %v", err)
	}
	defer admin.Exec(`DROP ROLE ` + role)
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(role, "full")
	_, err = postgres.Open(context.Background(), u.String())
	if !errors.Is(err, store.ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open as a role past its connection limit = %v, want store.ErrBusy and store.ErrUnavailable", err)
	}
}
