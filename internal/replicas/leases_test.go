package replicas

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// events records what a Cluster's lease handlers heard.
type events struct {
	mu           sync.Mutex
	gained, lost []string
	how          []Gain // how each of gained was gained
}

func (e *events) onGained(_ context.Context, sb string, how Gain) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gained = append(e.gained, sb)
	e.how = append(e.how, how)
}

func (e *events) onLost(sb string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lost = append(e.lost, sb)
}

// newPair makes two replicas on one fresh schema (migrated by the store), not running: the
// test drives their rounds (beat) itself.
func newPair(t *testing.T) (db string, a, b *Cluster, ea, eb *events, rega *prometheus.Registry) {
	t.Helper()
	db = storetest.FreshSchema(t, storetest.PostgresURL(t))
	st, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	rega = prometheus.NewRegistry()
	ea, eb = &events{}, &events{}
	a, err = New(context.Background(), Config{DatabaseURL: db, ID: "a", AdvertiseURL: "http://a", Registerer: rega})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err = New(context.Background(), Config{DatabaseURL: db, ID: "b", AdvertiseURL: "http://b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	a.OnLeases(ea.onGained, ea.onLost)
	b.OnLeases(eb.onGained, eb.onLost)
	return db, a, b, ea, eb, rega
}

// newReplica adds a replica to db (migrated already), not running: the test drives its rounds.
func newReplica(t *testing.T, db, id string) (*Cluster, *events) {
	t.Helper()
	e := &events{}
	c, err := New(context.Background(), Config{DatabaseURL: db, ID: id, AdvertiseURL: "http://" + id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.OnLeases(e.onGained, e.onLost)
	return c, e
}

// expire makes every lease of replica look expired, as when it stopped renewing them.
func expire(t *testing.T, c *Cluster, replica string) {
	t.Helper()
	if _, err := c.pool.Exec(context.Background(), `UPDATE leases SET expires_at = now() - interval '1 second' WHERE replica = $1`, replica); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseOwnerAndTakeover: the first to ask owns a sandbox; the other is told where; once the
// owner stops renewing, the other takes it over in its next round, and the old owner, at its
// next round, finds it lost (hangar_lease_losses_total) and stops.
func TestLeaseOwnerAndTakeover(t *testing.T) {
	t.Parallel()
	_, a, b, ea, eb, rega := newPair(t)
	ctx := context.Background()

	if url, mine, err := a.Owner(ctx, "sb1"); err != nil || !mine || url != "http://a" {
		t.Fatalf("a.Owner = %q, %v, %v; want a's own", url, mine, err)
	}
	if url, mine, err := b.Owner(ctx, "sb1"); err != nil || mine || url != "http://a" {
		t.Fatalf("b.Owner = %q, %v, %v; want a's URL", url, mine, err)
	}
	a.beat(ctx) // renewing keeps it
	if url, mine, _ := b.Owner(ctx, "sb1"); mine || url != "http://a" {
		t.Fatalf("after a renewed, b.Owner = %q, %v; want a's", url, mine)
	}
	if got := testutil.ToFloat64(a.losses); got != 0 {
		t.Fatalf("losses = %v before any loss", got)
	}

	expire(t, b, "a")
	b.beat(ctx)
	if len(eb.gained) != 1 || eb.gained[0] != "sb1" || eb.how[0] != Taken {
		t.Fatalf("b gained %v %v, want [sb1] taken", eb.gained, eb.how)
	}
	a.beat(ctx)
	if len(ea.lost) != 1 || ea.lost[0] != "sb1" {
		t.Fatalf("a lost %v, want [sb1]", ea.lost)
	}
	if got := testutil.ToFloat64(a.losses); got != 1 {
		t.Errorf("hangar_lease_losses_total = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(rega, "hangar_leases_held"); err != nil || n != 1 {
		t.Errorf("hangar_leases_held series = %d, %v", n, err)
	}
	if a.Held() != 0 || b.Held() != 1 {
		t.Errorf("held: a %d, b %d; want 0 and 1", a.Held(), b.Held())
	}
	if url, mine, _ := a.Owner(ctx, "sb1"); mine || url != "http://b" {
		t.Errorf("after the takeover a.Owner = %q, %v; want b's", url, mine)
	}
}

// TestLeaveHandsLeasesOver: a replica that leaves (shutdown) hands its leases to a live peer,
// which follows the sandboxes at its next round (at once, woken by the notification) without
// anyone asking for them; and a request that asks meanwhile is told the peer.
func TestLeaveHandsLeasesOver(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	a.leave()
	b.beat(ctx)
	if len(eb.gained) != 1 || eb.gained[0] != "sb1" || eb.how[0] != Handed || b.Held() != 1 {
		t.Fatalf("after a left and b ran a round, b gained %v %v (holds %d); want [sb1] handed, unasked", eb.gained, eb.how, b.Held())
	}
	if url, mine, err := b.Owner(ctx, "sb1"); err != nil || !mine || url != "http://b" {
		t.Errorf("after a left, b.Owner = %q, %v, %v; want b's", url, mine, err)
	}
}

// TestHandedWhileAsking: a lease handed to a replica between Owner's first statement (which
// finds it elsewhere) and its second (which takes free ones) is gained as handed, not taken:
// taken, the turns queued for the sandbox would fail as after a crash.
func TestHandedWhileAsking(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	b.beforeTake = func() {
		a.Leave()
		a.leave()
	}
	url, mine, err := b.Owner(ctx, "sb1")
	if err != nil || !mine || url != "http://b" {
		t.Fatalf("b.Owner as a handed sb1 over = %q, %v, %v; want b's", url, mine, err)
	}
	if len(eb.gained) != 1 || eb.how[0] != Handed {
		t.Errorf("b gained %v %v; want [sb1] handed", eb.gained, eb.how)
	}
}

// TestLeavingWhileAsking: a replica that begins to leave while Owner asks about a sandbox (past
// Owner's own check of leaving) does not say the sandbox is its own, whether it took a free
// lease or found one handed to it: Leave did not return that sandbox, so nothing would release
// what the caller started there, and leave hands the lease to a peer that starts it again.
func TestLeavingWhileAsking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("free", func(t *testing.T) {
		t.Parallel()
		_, a, b, _, eb, _ := newPair(t)
		b.beforeTake = func() { b.Leave() }
		if url, mine, err := b.Owner(ctx, "sb1"); !errors.Is(err, ErrLeaving) || mine {
			t.Fatalf("b.Owner of a free sandbox as b began to leave = %q, %v, %v; want ErrLeaving", url, mine, err)
		}
		if len(eb.gained) != 0 {
			t.Errorf("b, leaving, gained %v", eb.gained)
		}
		b.leave()
		if url, mine, err := a.Owner(ctx, "sb1"); err != nil || !mine {
			t.Errorf("after b left, a.Owner = %q, %v, %v; want a's", url, mine, err)
		}
	})
	t.Run("handed", func(t *testing.T) {
		t.Parallel()
		db, a, b, _, eb, _ := newPair(t)
		c, _ := newReplica(t, db, "c")
		if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
			t.Fatal("a does not own a free sandbox")
		}
		b.beforeTake = func() {
			if err := a.handOver(ctx, "sb1", "b"); err != nil {
				t.Error(err)
			}
			b.Leave()
		}
		if url, mine, err := b.Owner(ctx, "sb1"); !errors.Is(err, ErrLeaving) || mine {
			t.Fatalf("b.Owner of a sandbox handed to it as it began to leave = %q, %v, %v; want ErrLeaving", url, mine, err)
		}
		if len(eb.gained) != 0 {
			t.Errorf("b, leaving, gained %v", eb.gained)
		}
		b.leave()
		if url, mine, err := c.Owner(ctx, "sb1"); err != nil || (!mine && url != "http://a") {
			t.Errorf("after b left, c.Owner = %q, %v, %v; want a live replica's", url, mine, err)
		}
	})
}

// TestLeavingPeerGetsNoLease: two replicas that leave at once (a rollout replacing several
// pods) do not hand each other their leases: the one leaving second finds the first marked
// leaving and hands its lease to a replica that stays, though the first holds fewer.
func TestLeavingPeerGetsNoLease(t *testing.T) {
	t.Parallel()
	db, a, b, _, _, _ := newPair(t)
	c, ec := newReplica(t, db, "c")
	ctx := context.Background()
	for _, sb := range []string{"sb1", "sb2"} {
		if _, mine, _ := c.Owner(ctx, sb); !mine {
			t.Fatalf("c does not own free %s", sb)
		}
	}
	if _, mine, _ := a.Owner(ctx, "sb3"); !mine {
		t.Fatal("a does not own free sb3")
	}
	b.Leave() // holds nothing: the least loaded, were it not leaving
	a.Leave()
	a.leave()
	c.beat(ctx)
	if len(ec.gained) != 3 || ec.gained[2] != "sb3" || ec.how[2] != Handed {
		t.Errorf("c gained %v %v; want sb3 handed to it, not to b, which was leaving", ec.gained, ec.how)
	}
}

// TestLeaveAloneReleases: the last replica to leave releases its leases, and the next one to
// start takes them in its first round, unasked.
func TestLeaveAloneReleases(t *testing.T) {
	t.Parallel()
	db, a, b, _, _, _ := newPair(t)
	ctx := context.Background()
	if _, mine, _ := a.Owner(ctx, "sb1"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	b.leave()
	a.leave()
	c, ec := newReplica(t, db, "c")
	c.beat(ctx)
	if len(ec.gained) != 1 || ec.gained[0] != "sb1" || ec.how[0] != Taken {
		t.Fatalf("a new replica's first round gained %v %v; want [sb1] taken", ec.gained, ec.how)
	}
}

// TestHandedOverIsSaid: a lease a peer hands over (balancing, or leaving) is gained as Handed,
// whether the gainer's round finds it or a request asks for it first; one taken from a dead
// replica is Taken (TestCrashTakeoverInOneRound).
func TestHandedOverIsSaid(t *testing.T) {
	t.Parallel()
	_, a, b, _, eb, _ := newPair(t)
	ctx := context.Background()
	for _, sb := range []string{"sb1", "sb2", "sb3"} {
		if _, mine, _ := a.Owner(ctx, sb); !mine {
			t.Fatalf("a does not own free sandbox %s", sb)
		}
	}
	b.heartbeat(ctx)
	a.beat(ctx) // holds 3, b 0: hands sb1 to b
	if url, mine, err := b.Owner(ctx, "sb1"); err != nil || !mine || url != "http://b" {
		t.Fatalf("after a balanced, b.Owner(sb1) = %q, %v, %v; want b's", url, mine, err)
	}
	a.leave() // hands sb2 and sb3 to b
	b.beat(ctx)
	eb.mu.Lock()
	defer eb.mu.Unlock()
	if len(eb.gained) != 3 {
		t.Fatalf("b gained %v; want sb1, sb2 and sb3", eb.gained)
	}
	for i, how := range eb.how {
		if how != Handed {
			t.Errorf("b gained %s %s; want handed", eb.gained[i], how)
		}
	}
}

// TestTakeCountsAcrossReplicas: a token's streams count across replicas, and a replica's count
// goes once it leaves.
func TestTakeCountsAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, a, b, _, _, _ := newPair(t)
	ctx := context.Background()
	for i, c := range []*Cluster{a, b} {
		if ok, err := c.Take(ctx, "tok", 2); !ok || err != nil {
			t.Fatalf("take %d = %v, %v; want admitted", i, ok, err)
		}
	}
	if ok, err := a.Take(ctx, "tok", 2); ok || err != nil {
		t.Fatalf("a third take = %v, %v; want refused", ok, err)
	}
	b.Give("tok")
	if ok, _ := a.Take(ctx, "tok", 2); !ok {
		t.Fatal("a take after b gave one back was refused")
	}
	a.leave()
	if ok, _ := b.Take(ctx, "tok", 2); !ok {
		t.Fatal("a take after a left was refused: a's count stayed")
	}
}

// TestDestroyedSandboxLeaseDropped: the lease of a sandbox that was destroyed is dropped at the
// next round, without counting as a loss.
func TestDestroyedSandboxLeaseDropped(t *testing.T) {
	t.Parallel()
	db, a, _, ea, _, _ := newPair(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.EnsureUser(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	sb := store.Sandbox{Name: "gone", Owner: "u", Provider: "local", State: "running", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := st.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, mine, _ := a.Owner(ctx, "gone"); !mine {
		t.Fatal("a does not own a free sandbox")
	}
	sb.State = "destroyed"
	if err := st.UpdateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	a.beat(ctx)
	if a.Held() != 0 || len(ea.lost) != 0 || testutil.ToFloat64(a.losses) != 0 {
		t.Errorf("after the round: held %d, lost %v, losses %v; want the lease dropped quietly", a.Held(), ea.lost, testutil.ToFloat64(a.losses))
	}
}

// TestOwnerUnavailableIs503: when the database does not answer whom a sandbox belongs to, the
// error is the store's ErrUnavailable (a 503 to retry), not an unclassified one (a 500).
func TestOwnerUnavailableIs503(t *testing.T) {
	t.Parallel()
	_, a, _, _, _, _ := newPair(t)
	a.pool.Close()
	if _, _, err := a.Owner(context.Background(), "sb1"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Owner on a closed pool: %v, want store.ErrUnavailable", err)
	}
}
