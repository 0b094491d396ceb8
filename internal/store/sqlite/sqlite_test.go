package sqlite_test

import (
	"context"
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
