package postgres_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
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
