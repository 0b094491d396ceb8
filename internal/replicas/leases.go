package replicas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// topicReleased is what a replica says after handing leases to a peer or releasing them (it
// shuts down, or balances): the others run a round at once, to gain what they were handed and
// take their share of what was released.
const topicReleased = "released"

// OnLeases sets what happens when this replica gains a sandbox's lease (follow its processes,
// watch its turns), saying how, and when it loses one (stop: another replica follows them
// now). gained runs before Owner returns a newly gained lease as this replica's. A replica's
// lost returns once it stopped following the sandbox: a lease is handed over only after it.
func (c *Cluster) OnLeases(gained func(ctx context.Context, sandbox string, how Gain), lost func(sandbox string)) {
	c.gained, c.lost = gained, lost
}

// Gain says how this replica gained a sandbox's lease.
type Gain int

const (
	// Taken: from nobody, or from a replica that died or stopped renewing it. What that
	// replica was doing in the sandbox when it stopped is not known.
	Taken Gain = iota
	// Handed: its holder handed it over (it shut down, or balanced) once it had stopped
	// following the sandbox (its lost handler returned).
	Handed
)

func (g Gain) String() string {
	if g == Handed {
		return "handed"
	}
	return "taken"
}

// Owner says which replica owns sandbox's followers, taking the lease when nobody holds it or
// its holder let it expire: mine is true when this replica does (and holds it from now on);
// else url is where the owner is reached.
func (c *Cluster) Owner(ctx context.Context, sandbox string) (url string, mine bool, err error) {
	c.mu.Lock()
	_, held := c.held[sandbox]
	handing, leaving := c.handing[sandbox], c.leaving
	c.mu.Unlock()
	if leaving {
		return "", false, fmt.Errorf("find the owner of sandbox %s: %w", sandbox, ErrLeaving)
	}
	if handing != nil {
		// Being handed to a peer: the rows name the new owner once it is done (milliseconds).
		select {
		case <-handing:
		case <-ctx.Done():
			return "", false, fmt.Errorf("find the owner of sandbox %s: %w", sandbox, ctx.Err())
		}
	}
	if held {
		// Renewed by keep, which drops it from held once another replica has it: no write per
		// request.
		return c.cfg.AdvertiseURL, true, nil
	}
	// A peer may have handed it to this replica, which no round has seen yet: it is this
	// replica's, handed over cleanly.
	if ok, err := c.renewHanded(ctx, sandbox); err != nil {
		return "", false, err
	} else if ok {
		return c.cfg.AdvertiseURL, true, nil
	}
	if c.beforeTake != nil {
		c.beforeTake()
	}
	// Free (nobody's, expired, or of a replica no longer listed): take it. A lease this replica
	// holds unexpired is left alone here, though: a peer that handed it over since the
	// statement above did so cleanly, and taking it would say otherwise (and fail the turns
	// queued for the sandbox, as after a crash).
	var owner string
	err = c.pool.QueryRow(ctx, `INSERT INTO leases AS l (sandbox, replica, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
		ON CONFLICT (sandbox) DO UPDATE SET replica = EXCLUDED.replica, expires_at = EXCLUDED.expires_at,
			epoch = l.epoch + CASE WHEN l.replica = EXCLUDED.replica THEN 0 ELSE 1 END
		WHERE l.expires_at < now() OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = l.replica)
		RETURNING l.replica`, sandbox, c.cfg.ID, c.cfg.LeaseTTL.Milliseconds()).Scan(&owner)
	if err == nil {
		if !c.gain(ctx, sandbox, Taken) {
			return "", false, fmt.Errorf("find the owner of sandbox %s: %w", sandbox, ErrLeaving)
		}
		return c.cfg.AdvertiseURL, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", false, unavailable(ctx, fmt.Errorf("take the lease of sandbox %s: %w", sandbox, err))
	}
	// Another replica holds it, is listed, and its lease has not expired. (A lease of a replica
	// no longer listed — one that left, or was found dead — is free: a replica that was
	// handed a lease as it left does not keep it for a lease time.)
	err = c.pool.QueryRow(ctx, `SELECT l.replica, COALESCE(r.url, '') FROM leases l LEFT JOIN replicas r ON r.id = l.replica
		WHERE l.sandbox = $1`, sandbox).Scan(&owner, &url)
	if err != nil {
		return "", false, unavailable(ctx, fmt.Errorf("find the owner of sandbox %s: %w", sandbox, err))
	}
	if owner == c.cfg.ID {
		// Handed to this replica between the first statement and the second.
		if ok, err := c.renewHanded(ctx, sandbox); err != nil {
			return "", false, err
		} else if ok {
			return c.cfg.AdvertiseURL, true, nil
		}
		return "", false, fmt.Errorf("find the owner of sandbox %s: its lease moved while this replica asked: %w", sandbox, store.ErrUnavailable)
	}
	if url == "" {
		// Unlisted a moment ago (it left or was found dead): its leases are released at the
		// next round; try again then.
		return "", false, fmt.Errorf("find the owner of sandbox %s: replica %s holds its lease but is not listed: %w", sandbox, owner, store.ErrUnavailable)
	}
	return url, false, nil
}

// renewHanded renews sandbox's lease when the rows say this replica holds it, unexpired,
// though it did not know: a peer handed it over. It is gained then, as handed; ErrLeaving when
// this replica began to leave meanwhile (its leave hands the lease on).
func (c *Cluster) renewHanded(ctx context.Context, sandbox string) (bool, error) {
	tag, err := c.pool.Exec(ctx, `UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond'
		WHERE sandbox = $1 AND replica = $2 AND expires_at >= now()`, sandbox, c.cfg.ID, c.cfg.LeaseTTL.Milliseconds())
	if err != nil {
		return false, unavailable(ctx, fmt.Errorf("take the lease of sandbox %s: %w", sandbox, err))
	}
	if tag.RowsAffected() != 1 {
		return false, nil
	}
	if !c.gain(ctx, sandbox, Handed) {
		return false, fmt.Errorf("find the owner of sandbox %s: %w", sandbox, ErrLeaving)
	}
	return true, nil
}

// ErrLeaving says this replica is shutting down: it takes no lease and serves no sandbox's
// processes any more; its peers do.
var ErrLeaving = errors.New("this hangar replica is shutting down; its sandboxes are handed to the other replicas")

// Leave starts this replica's shutdown: from now on it takes no lease, and it forgets those it
// holds, returning their sandboxes, for the caller to stop following them before Run's end
// hands their leases over (cancel Run's context once that is done).
func (c *Cluster) Leave() []string {
	c.mu.Lock()
	c.leaving = true
	var held []string
	for sb := range c.held {
		held = append(held, sb)
	}
	clear(c.held)
	c.mu.Unlock()
	// Said in the table, so that no peer hands it a lease meanwhile (one balancing, or one
	// leaving at the same time, as a rollout with several pods at once does).
	ctx, cancel := context.WithTimeout(context.Background(), c.statementBound())
	defer cancel()
	if _, err := c.pool.Exec(ctx, `UPDATE replicas SET leaving = true WHERE id = $1`, c.cfg.ID); err != nil {
		c.log.Warn("say this replica is leaving", "err", err)
	}
	return held
}

// unavailable marks err, a failed statement of a request's, as the database's not answering
// (a 503 to try again, as the store's own), unless the request itself ended.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// gain records a lease this replica holds, running the gained handler when it is new. False
// when this replica is leaving: it follows nothing more, and the lease is not its to use (leave
// hands it on with the rest, or it is free once this replica is unlisted). Owner, which may
// have passed its own check of leaving before Leave, must then not say the sandbox is this
// replica's: Leave did not return it, so nothing would release what its caller starts there.
func (c *Cluster) gain(ctx context.Context, sandbox string, how Gain) bool {
	c.mu.Lock()
	if c.leaving {
		c.mu.Unlock()
		return false
	}
	_, known := c.held[sandbox]
	if !known {
		c.gen++
		c.held[sandbox] = c.gen
	}
	c.mu.Unlock()
	if !known {
		c.log.Info("holding the lease of a sandbox", "sandbox", sandbox, "how", how)
		if c.gained != nil {
			c.gained(ctx, sandbox, how)
		}
	}
	return true
}

// keep runs a round every Round (at once when a peer says it released or handed over leases),
// until ctx ends.
func (c *Cluster) keep(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.Round, "replicas", "round")
	defer t.Stop()
	for {
		c.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.scan:
		}
	}
}

// beat is one round of keep: say this replica is alive, unlist the dead ones, renew this
// replica's leases (those no longer its own are lost, those handed to it are gained), take its
// share of the free ones, and hand one to a peer that holds fewer.
func (c *Cluster) beat(ctx context.Context) {
	// The round's own statements are bounded: on a connection that a partition left open, a
	// statement would wait for TCP to give up (many minutes), and the check below that stops
	// following after a lease time unrenewed would never run. What gaining a lease does
	// (adopting processes, watching turns) keeps ctx.
	sctx, cancel := context.WithTimeout(ctx, c.statementBound())
	defer cancel()
	if !c.stillPresent(sctx) {
		// The session that said this replica is alive ended: a peer that reaches the database
		// may take its leases at its next round, and the renewal below then finds them lost
		// (two followers for at most a round, which records nothing twice). With the database
		// gone for all, nobody can: following goes on until a lease time unrenewed, as below.
		c.log.Warn("this replica's presence in the database was lost (its connection broke): the renewal says which sandboxes it still holds")
	}
	if err := c.heartbeat(sctx); err != nil {
		c.log.Warn("replica heartbeat", "err", err)
	}
	if err := c.forgetDead(sctx); err != nil {
		c.log.Warn("forget dead replicas", "err", err)
	}
	if _, err := c.reap(sctx); err != nil {
		c.log.Warn("look for dead replicas", "err", err)
	}
	if err := c.renew(ctx); err != nil {
		c.log.Warn("renew leases", "err", err)
		c.mu.Lock()
		late := c.cfg.Clock.Since(c.lastRenewed) >= c.cfg.LeaseTTL
		c.mu.Unlock()
		if late {
			// Unrenewed for a whole lease time: another replica may follow these sandboxes
			// now, and two followers must not run on.
			c.loseAll()
		}
		return
	}
	c.mu.Lock()
	leaving := c.leaving
	c.mu.Unlock()
	if leaving {
		return // its leases are handed over as Run ends: it takes none
	}
	l, err := c.loads(ctx)
	if err != nil {
		c.log.Warn("count the leases of the replicas", "err", err)
		return
	}
	if err := c.takeOver(ctx, l); err != nil {
		c.log.Warn("take over free leases", "err", err)
		return
	}
	if err := c.balance(ctx, l); err != nil {
		c.log.Warn("hand a lease to a replica that holds fewer", "err", err)
	}
}

// statementBound bounds a round's statements: a lease time (at least 5 s, so that a loaded
// database is not taken for a lost one). Past it the lease is late anyway.
func (c *Cluster) statementBound() time.Duration { return max(c.cfg.LeaseTTL, 5*time.Second) }

// renew moves the expiry of this replica's leases; those it held and no longer does are lost,
// and those the rows say it holds and it did not know of (a peer handed them over) are gained.
// The leases of sandboxes that were destroyed (or failed) are dropped first: nothing there is
// left to follow.
func (c *Cluster) renew(ctx context.Context) error {
	start := c.cfg.Clock.Now()
	sctx, cancel := context.WithTimeout(ctx, c.statementBound()) // its statements; gaining keeps ctx
	defer cancel()
	rows, err := c.pool.Query(sctx, `DELETE FROM leases l USING sandboxes s
		WHERE l.replica = $1 AND s.name = l.sandbox AND s.state IN ('destroyed', 'failed') RETURNING l.sandbox`, c.cfg.ID)
	if err != nil {
		return err
	}
	dropped, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, sb := range dropped {
		delete(c.held, sb)
	}
	before := c.gen // gains after this are newer than what the rows below say
	c.mu.Unlock()
	rows, err = c.pool.Query(sctx, `UPDATE leases SET expires_at = now() + $2 * interval '1 millisecond' WHERE replica = $1 RETURNING sandbox`,
		c.cfg.ID, c.cfg.LeaseTTL.Milliseconds())
	if err != nil {
		return err
	}
	mine, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	still := make(map[string]bool, len(mine))
	for _, sb := range mine {
		still[sb] = true
	}
	c.mu.Lock()
	c.lastRenewed = start
	var gone, handed []string
	for sb, gen := range c.held {
		if !still[sb] && gen <= before {
			gone = append(gone, sb)
			delete(c.held, sb)
		}
	}
	for _, sb := range mine {
		if _, known := c.held[sb]; !known && c.handing[sb] == nil && !c.leaving {
			handed = append(handed, sb)
		}
	}
	c.mu.Unlock()
	for _, sb := range gone {
		c.lose(sb)
	}
	for _, sb := range handed {
		c.log.Info("a peer handed this replica the lease of a sandbox", "sandbox", sb)
		c.gain(ctx, sb, Handed)
	}
	return nil
}

func (c *Cluster) loseAll() {
	c.mu.Lock()
	var gone []string
	for sb := range c.held {
		gone = append(gone, sb)
	}
	clear(c.held)
	c.mu.Unlock()
	for _, sb := range gone {
		c.lose(sb)
	}
}

// lose stops following a sandbox whose lease went to another replica.
func (c *Cluster) lose(sandbox string) {
	c.log.Warn("lost the lease of a sandbox: another replica follows it now", "sandbox", sandbox)
	if c.losses != nil {
		c.losses.Inc()
	}
	if c.lost != nil {
		c.lost(sandbox)
	}
}

// leave hands this replica's leases to the live peers (each to the one that holds fewest),
// or releases them (expired now, for whichever replica comes first) when none is alive, and
// unlists it, then tells the others to run a round now. The domain stopped following before:
// a peer adopts each sandbox with this replica's marks as they were last recorded.
func (c *Cluster) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.mu.Lock()
	clear(c.held)
	c.mu.Unlock()
	if err := c.handOverAll(ctx); err != nil {
		c.log.Warn("hand leases over to the peers", "err", err)
		if _, err := c.pool.Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE replica = $1`, c.cfg.ID); err != nil {
			c.log.Warn("release leases", "err", err)
		}
	}
	if _, err := c.pool.Exec(ctx, `DELETE FROM stream_slots WHERE replica = $1`, c.cfg.ID); err != nil {
		c.log.Warn("hand stream counts back", "err", err)
	}
	if _, err := c.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, c.cfg.ID); err != nil {
		c.log.Warn("unlist replica", "err", err)
	}
	c.Publish(ctx, topicReleased, "")
}

// Held is how many leases this replica holds.
func (c *Cluster) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *Cluster) metrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	c.losses = prometheus.NewCounter(prometheus.CounterOpts{Name: "hangar_lease_losses_total",
		Help: "Leases of sandboxes this replica lost to another replica without handing them back (it failed to renew them in time)."})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hangar_leases_held",
		Help: "Sandboxes whose process followers and turn watchers this replica owns (their leases)."}, func() float64 { return float64(c.Held()) })
	reg.MustRegister(c.losses, held)
}
