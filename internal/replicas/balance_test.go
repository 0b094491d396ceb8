package replicas

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// crash makes c look as a replica killed with SIGKILL does to its peers: its database session
// (and with it its presence lock) ends. Its leases are as it left them, unexpired. The server
// ends the session a moment after the connection closes: crash returns once it has, as a
// peer's next round would find it.
func crash(t *testing.T, c *Cluster) {
	t.Helper()
	c.presenceMu.Lock()
	pid := c.presence.PgConn().PID()
	c.presenceMu.Unlock()
	c.absent()
	providertest.WaitFor(t, 30*time.Second, 10*time.Millisecond, "the crashed replica's session to end", func() bool {
		var n int
		err := c.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n)
		return err == nil && n == 0
	})
}

// rounds runs n rounds of each replica, in turn.
func rounds(ctx context.Context, n int, cs ...*Cluster) {
	for range n {
		for _, c := range cs {
			c.beat(ctx)
		}
	}
}

// held is how many leases each replica holds.
func held(cs ...*Cluster) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.Held())
	}
	return out
}

// spread reports whether the replicas' leases differ by at most one and sum to total.
func spread(total int, cs ...*Cluster) bool {
	lo, hi, sum := total, 0, 0
	for _, n := range held(cs...) {
		lo, hi, sum = min(lo, n), max(hi, n), sum+n
	}
	return sum == total && hi-lo <= 1
}

// TestCrashTakeoverInOneRound: a replica whose session ended (killed) is seen dead at a peer's
// next round, which takes its leases at once — not after they expire (15 s here) — and unlists
// it; the dead one's leases are gained by the peer without anyone asking.
func TestCrashTakeoverInOneRound(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	crash(t, a)
	b.beat(ctx)
	if len(eb.gained) != 1 || eb.gained[0] != "sb1" || eb.how[0] != Taken {
		t.Fatalf("b's first round after a was killed gained %v %v; want [sb1] taken", eb.gained, eb.how)
	}
	var listed int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE id = 'a'`).Scan(&listed); err != nil || listed != 0 {
		t.Errorf("the dead replica is listed %d times (%v); want unlisted", listed, err)
	}
}

// TestUnreachableFindsTheDead: a forwarding that found the owner unreachable makes the replica
// look for dead replicas at once, so asking the owner again takes the lease.
func TestUnreachableFindsTheDead(t *testing.T) {
	t.Parallel()
	_, a, b, _, _, _ := newPair(t)
	ctx := context.Background()
	if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	if _, mine, _ := b.Owner(ctx, "sb1"); mine {
		t.Fatal("b owns a's sandbox while a is alive")
	}
	b.Unreachable(ctx, "http://a") // a is alive: nothing changes
	if _, mine, _ := b.Owner(ctx, "sb1"); mine {
		t.Fatal("b took a live replica's sandbox")
	}
	crash(t, a)
	b.Unreachable(ctx, "http://a")
	if url, mine, err := b.Owner(ctx, "sb1"); err != nil || !mine {
		t.Fatalf("after a was killed and found unreachable, b.Owner = %q, %v, %v; want b's", url, mine, err)
	}
}

// TestLeasesSpread, with three replicas and seven sandboxes all first owned by one: the rounds
// spread them (at most one apart); after one replica is killed, the two survivors split its
// leases; a replica that joins then takes its share from them.
func TestLeasesSpread(t *testing.T) {
	t.Parallel()
	db, a, b, _, _, _ := newPair(t)
	c, _ := newReplica(t, db, "c")
	ctx := context.Background()
	const total = 7
	for i := range total {
		if _, mine, _ := a.Owner(ctx, fmt.Sprintf("sb%d", i)); !mine {
			t.Fatalf("a does not own free sandbox %d", i)
		}
	}
	rounds(ctx, total, a, b, c)
	if !spread(total, a, b, c) {
		t.Fatalf("after %d rounds the replicas hold %v; want the %d leases spread", total, held(a, b, c), total)
	}

	crash(t, c)
	rounds(ctx, 1, a, b)
	if !spread(total, a, b) {
		t.Fatalf("one round after c was killed, a and b hold %v; want c's leases split between them", held(a, b))
	}

	d, _ := newReplica(t, db, "d")
	rounds(ctx, total, a, b, d)
	if !spread(total, a, b, d) || d.Held() == 0 {
		t.Fatalf("after a replica joined, the replicas hold %v; want the leases spread again", held(a, b, d))
	}
}

// TestOlderReplicaNotReaped: a listed replica of an older hangar holds no presence lock, and
// is not taken for dead: its leases stay its own until they expire (reaping it made its leases
// move back and forth every round during an upgrade, as it listed itself again).
func TestOlderReplicaNotReaped(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	if _, err := a.pool.Exec(ctx, `INSERT INTO replicas (id, url, started_at, seen_at) VALUES ('old', 'http://old', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO leases (sandbox, replica, expires_at) VALUES ('sb-old', 'old', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	rounds(ctx, 2, a, b)
	var owner string
	if err := a.pool.QueryRow(ctx, `SELECT replica FROM leases WHERE sandbox = 'sb-old'`).Scan(&owner); err != nil || owner != "old" {
		t.Errorf("the older replica's lease is held by %q (%v), want still its own", owner, err)
	}
	if len(eb.gained) != 0 {
		t.Errorf("b gained %v from a live older replica, want nothing", eb.gained)
	}
}

// TestUnlistedHolderIsFree: a lease held by a replica that is no longer listed (it left after a
// peer handed it the lease, or was unlisted as dead) is free at once — to a request and to a
// round — not after its expiry (a lease time of 503s for its sandbox).
func TestUnlistedHolderIsFree(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	for _, sb := range []string{"sb-asked", "sb-round"} {
		if _, err := a.pool.Exec(ctx, `INSERT INTO leases (sandbox, replica, expires_at) VALUES ($1, 'gone', now() + interval '1 hour')`, sb); err != nil {
			t.Fatal(err)
		}
	}
	if _, mine, err := a.Owner(ctx, "sb-asked"); err != nil || !mine {
		t.Errorf("Owner of a sandbox whose holder is not listed: mine %v, %v; want a's", mine, err)
	}
	b.beat(ctx)
	if len(eb.gained) != 1 || eb.gained[0] != "sb-round" {
		t.Errorf("b's round gained %v, want [sb-round]", eb.gained)
	}
}

// TestBalanceHandsTheOldestLease: a replica that balances hands on the lease it has held
// longest, not one it was just handed — under load, handing on the first by name made one
// sandbox move every few rounds, its followers and turn watchers restarting each time.
func TestBalanceHandsTheOldestLease(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	for _, sb := range []string{"sb2", "sb1"} { // sb1 gained last
		if _, mine, _ := a.Owner(ctx, sb); !mine {
			t.Fatalf("a does not own free %s", sb)
		}
	}
	rounds(ctx, 1, a, b)
	if len(eb.gained) != 1 || eb.gained[0] != "sb2" {
		t.Errorf("b was handed %v; want [sb2], the lease a held longest", eb.gained)
	}
}
