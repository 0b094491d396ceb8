package sqlite_test

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sqlite.Open(ctx, dir)
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
	s, err = sqlite.Open(ctx, dir) // migrations run again: must be a no-op
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if n, err := s.CountTokens(ctx); err != nil || n != 1 {
		t.Fatalf("CountTokens after reopen = %d, %v; want 1", n, err)
	}
}

// TestConcurrentFirstOpens: hangars opening one new data directory at once (two serves by
// mistake, a serve and a CLI) all find it migrated, once: the migrations run under a lock on
// the database file, not twice side by side (which fails: a table that already exists).
func TestConcurrentFirstOpens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const opens = 4
	errs := make(chan error, opens)
	var ready sync.WaitGroup
	ready.Add(opens)
	start := make(chan struct{})
	for range opens {
		go func() {
			ready.Done()
			<-start
			s, err := sqlite.Open(context.Background(), dir)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	ready.Wait()
	close(start)
	for range opens {
		if err := <-errs; err != nil {
			t.Errorf("Open beside %d others of a new data directory: %v", opens-1, err)
		}
	}
}
