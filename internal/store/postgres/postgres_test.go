package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

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
