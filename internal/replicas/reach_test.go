package replicas

import (
	"context"
	"testing"

	"github.com/coder/quartz"
	"github.com/jackc/pgx/v5"

	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// TestReach: a live replica is reached at the URL it listed; an id no replica has, one whose
// heartbeat is older than a lease (it died) and one that left are not reached at all — once a
// third of a lease has passed since the last time it was found live, for which it is
// remembered.
func TestReach(t *testing.T) {
	t.Parallel()
	db := storetest.FreshSchema(t, storetest.PostgresURL(t))
	st, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	clock := quartz.NewMock(t)
	replica := func(id string) *Cluster {
		c, err := New(context.Background(), Config{DatabaseURL: db, ID: id, AdvertiseURL: "http://" + id, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a, b, c := replica("a"), replica("b"), replica("c")
	ctx := context.Background()
	reach := func(from *Cluster, id, want, when string) {
		t.Helper()
		if url, err := from.Reach(ctx, id); err != nil || url != want {
			t.Errorf("%s.Reach(%s) %s = %q, %v; want %q", from.ID(), id, when, url, err, want)
		}
	}
	reach(a, "b", "http://b", "while b lives")
	reach(a, "nosuch", "", "for an id no replica has")

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// b's last heartbeat, as a replica that died a lease ago left it.
	if _, err := conn.Exec(ctx, `UPDATE replicas SET seen_at = now() - $1 * interval '1 millisecond' WHERE id = 'b'`, b.cfg.LeaseTTL.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	reach(c, "b", "", "after b's heartbeat stopped, asked for the first time")
	reach(a, "b", "http://b", "after b's heartbeat stopped, found live a moment ago")
	clock.Advance(a.cfg.LeaseTTL / 3)
	reach(a, "b", "", "after b's heartbeat stopped, a third of a lease later")

	reach(b, "a", "http://a", "while a lives")
	a.leave()
	reach(c, "a", "", "after a left")
	clock.Advance(b.cfg.LeaseTTL / 3)
	reach(b, "a", "", "after a left, a third of a lease later")
}
