package cluster

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestReach: a live replica is reached at the URL it listed; an id no replica has, one whose
// heartbeat is older than a lease (it died) and one that left are not reached at all.
func TestReach(t *testing.T) {
	t.Parallel()
	db, a, b, _, _, _ := newPair(t)
	ctx := context.Background()
	if url, err := a.Reach(ctx, "b"); err != nil || url != "http://b" {
		t.Errorf("a.Reach(b) = %q, %v; want http://b", url, err)
	}
	if url, err := a.Reach(ctx, "nosuch"); err != nil || url != "" {
		t.Errorf("a.Reach(nosuch) = %q, %v; want none", url, err)
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// b's last heartbeat, as a replica that died a lease time ago left it.
	if _, err := conn.Exec(ctx, `UPDATE replicas SET seen_at = now() - $1 * interval '1 millisecond' WHERE id = 'b'`, b.cfg.LeaseTTL.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if url, err := a.Reach(ctx, "b"); err != nil || url != "" {
		t.Errorf("a.Reach(b) after b's heartbeat stopped = %q, %v; want none", url, err)
	}
	if url, err := b.Reach(ctx, "a"); err != nil || url != "http://a" {
		t.Errorf("b.Reach(a) = %q, %v; want http://a", url, err)
	}
	a.leave()
	if url, err := b.Reach(ctx, "a"); err != nil || url != "" {
		t.Errorf("b.Reach(a) after a left = %q, %v; want none", url, err)
	}
}
