package replicas

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Spreading the leases. Each round a replica takes its fair share — ceil(leases / live
// replicas) — of the free leases (released by a replica that left without a live peer, or of
// a replica seen dead, or expired), so the survivors of a crash split its sandboxes; a free
// lease left untaken for two rounds (its share-holder is slow, or stalled) is taken by whoever
// comes, so none stays free. Then, when nothing is free, a replica that holds two or more
// leases more than the least loaded live peer hands it one: it stops following the sandbox
// first (its attached clients end with shutdown, as at a shutdown), then moves the lease to
// the peer and tells it, and the peer adopts at once. One per round, so a joining replica
// fills up over a few rounds while the others keep serving.

// load is the replicas' leases as a round sees them.
type load struct {
	live  map[string]int // live replicas (listed, seen within a lease time, not leaving) → unexpired leases held
	total int            // leases
	free  int            // expired (released, of a dead replica, or not renewed)
	stale int            // expired for more than two rounds
}

// loads reads the load. This replica is counted live whatever its heartbeat says.
func (c *Cluster) loads(ctx context.Context) (load, error) {
	l := load{live: map[string]int{c.cfg.ID: 0}}
	rows, err := c.pool.Query(ctx, `SELECT r.id, count(l.sandbox) FROM replicas r
		LEFT JOIN leases l ON l.replica = r.id AND l.expires_at >= now()
		WHERE (r.seen_at > now() - $2 * interval '1 millisecond' AND NOT r.leaving) OR r.id = $1 GROUP BY r.id`, c.cfg.ID, c.cfg.LeaseTTL.Milliseconds())
	if err != nil {
		return l, err
	}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { l.live[id] = n; return nil }); err != nil {
		return l, err
	}
	err = c.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at < now()),
		count(*) FILTER (WHERE expires_at < now() - $1 * interval '1 millisecond') FROM leases`,
		2*c.cfg.Round.Milliseconds()).Scan(&l.total, &l.free, &l.stale)
	return l, err
}

// share is ceil(total / live replicas).
func (l load) share() int {
	return (l.total + len(l.live) - 1) / len(l.live)
}

// takeOver takes this replica's share of the free leases (and every stale one), oldest first,
// and follows their sandboxes.
func (c *Cluster) takeOver(ctx context.Context, l load) error {
	n := min(l.free, max(l.share()-l.live[c.cfg.ID], l.stale))
	if n <= 0 {
		return nil
	}
	rows, err := c.pool.Query(ctx, `UPDATE leases l SET replica = $1, expires_at = now() + $2 * interval '1 millisecond', epoch = l.epoch + 1
		FROM (SELECT sandbox FROM leases WHERE expires_at < now() ORDER BY expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) f
		WHERE l.sandbox = f.sandbox AND l.expires_at < now() RETURNING l.sandbox`, c.cfg.ID, c.cfg.LeaseTTL.Milliseconds(), n)
	if err != nil {
		return err
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, sb := range taken {
		c.log.Info("took over the lease of a sandbox whose replica is gone or released it", "sandbox", sb)
		c.gain(ctx, sb, Taken)
	}
	l.live[c.cfg.ID] += len(taken)
	return nil
}

// balance hands one of this replica's leases to the least loaded live peer when it holds two
// or more than that peer, and nothing is free (a takeover in progress settles first).
func (c *Cluster) balance(ctx context.Context, l load) error {
	if l.free > 0 {
		return nil
	}
	peer, ok := leastLoaded(l.live, c.cfg.ID)
	if !ok || l.live[c.cfg.ID]-l.live[peer] < 2 {
		return nil
	}
	// The lease held longest: one just handed here (a peer left, or balanced) is not handed on
	// at once, which under load made one sandbox move every few rounds, its followers and
	// turn watchers restarting each time.
	c.mu.Lock()
	oldest, first := "", uint64(0)
	for sb, gen := range c.held {
		if oldest == "" || gen < first || (gen == first && sb < oldest) {
			oldest, first = sb, gen
		}
	}
	c.mu.Unlock()
	if oldest == "" {
		return nil
	}
	if err := c.handOver(ctx, oldest, peer); err != nil {
		return err
	}
	c.Publish(ctx, topicReleased, peer)
	return nil
}

// leastLoaded is the live replica other than self holding fewest leases (the first by id on a
// tie); false when there is none.
func leastLoaded(live map[string]int, self string) (string, bool) {
	best, ok := "", false
	for id, n := range live {
		if id == self {
			continue
		}
		if !ok || n < live[best] || (n == live[best] && id < best) {
			best, ok = id, true
		}
	}
	return best, ok
}

// handOver stops following sandbox here and moves its lease to peer. Meanwhile Owner waits for
// it (a request does not take the lease back), and afterwards names peer.
func (c *Cluster) handOver(ctx context.Context, sandbox, peer string) error {
	done := make(chan struct{})
	c.mu.Lock()
	delete(c.held, sandbox)
	c.handing[sandbox] = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.handing, sandbox)
		c.mu.Unlock()
		close(done)
	}()
	c.log.Info("handing the lease of a sandbox to a replica that holds fewer", "sandbox", sandbox, "to", peer)
	if c.lost != nil {
		c.lost(sandbox)
	}
	_, err := c.pool.Exec(ctx, `UPDATE leases SET replica = $3, expires_at = now() + $4 * interval '1 millisecond', epoch = epoch + 1
		WHERE sandbox = $1 AND replica = $2`, sandbox, c.cfg.ID, peer, c.cfg.LeaseTTL.Milliseconds())
	if err != nil {
		// Not followed here any more: release it, for any replica to take.
		if _, err2 := c.pool.Exec(context.WithoutCancel(ctx), `UPDATE leases SET expires_at = now() - interval '1 millisecond'
			WHERE sandbox = $1 AND replica = $2`, sandbox, c.cfg.ID); err2 != nil {
			c.log.Warn("release a lease", "sandbox", sandbox, "err", err2)
		}
		return fmt.Errorf("hand the lease of sandbox %s to replica %s: %w", sandbox, peer, err)
	}
	return nil
}

// handOverAll moves every lease the rows say this replica holds to the live peers, each to the
// one holding fewest at that moment; with no live peer it releases them (expired now). The
// domain stopped following them already (leave).
func (c *Cluster) handOverAll(ctx context.Context) error {
	if _, err := c.reap(ctx); err != nil {
		return err
	}
	l, err := c.loads(ctx)
	if err != nil {
		return err
	}
	rows, err := c.pool.Query(ctx, `SELECT sandbox FROM leases WHERE replica = $1 ORDER BY sandbox`, c.cfg.ID)
	if err != nil {
		return err
	}
	mine, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(mine) == 0 {
		return nil
	}
	if _, ok := leastLoaded(l.live, c.cfg.ID); !ok {
		c.log.Info("no other replica is alive: releasing the leases for whichever starts next", "count", len(mine))
		_, err := c.pool.Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE replica = $1`, c.cfg.ID)
		return err
	}
	for _, sb := range mine {
		peer, _ := leastLoaded(l.live, c.cfg.ID)
		if _, err := c.pool.Exec(ctx, `UPDATE leases SET replica = $3, expires_at = now() + $4 * interval '1 millisecond', epoch = epoch + 1
			WHERE sandbox = $1 AND replica = $2`, sb, c.cfg.ID, peer, c.cfg.LeaseTTL.Milliseconds()); err != nil {
			return fmt.Errorf("hand the lease of sandbox %s to replica %s: %w", sb, peer, err)
		}
		l.live[peer]++
	}
	c.log.Info("handed the leases of this replica's sandboxes to the live replicas", "count", len(mine))
	return nil
}
