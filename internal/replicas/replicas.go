// Package replicas lets several `hangar serve` replicas on one PostgreSQL act as one service: a
// notification channel between them (LISTEN/NOTIFY), the list of live replicas with the URL each
// is reached at, and leases that make one replica the owner of each sandbox's process followers
// and turn watchers (leases.go). Rows stay the source of truth: a notification says only that
// something changed (an id), never what, so a missed one costs a read, never data. It is used
// only with PostgreSQL; with SQLite hangar is one process and nothing here runs. Passing a
// request on to the replica that owns its sandbox is its subpackage forward's; each domain
// package's hooks for several replicas are in its replicas.go.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Config configures a Cluster. Zero values are defaults.
type Config struct {
	// DatabaseURL is the PostgreSQL database the replicas share (HANGAR_DATABASE_URL), its
	// search_path included. Required.
	DatabaseURL string
	// ID names this replica in the replicas table and in logs. Default: a random id, new at
	// each start (a restarted replica is a new one; its old leases expire).
	ID string
	// AdvertiseURL is where the other replicas reach this one's listener
	// (HANGAR_ADVERTISE_URL), to forward requests for the sandboxes it owns. Required.
	AdvertiseURL string
	// LeaseTTL is how long a lease holds without being renewed (HANGAR_LEASE_SECONDS): the
	// bound on a takeover when a replica stops renewing without its database session ending
	// (a network partition, a frozen VM). A replica that is killed or crashes is seen dead in
	// the next Round instead (presence.go). Default 15s.
	LeaseTTL time.Duration
	// Round is how often a replica renews its leases, looks for dead peers, takes over
	// released and expired leases and hands a few of its own to a peer that holds fewer
	// (balance.go). It bounds a takeover after a crash: one Round to see the replica dead,
	// and the adoption. Default 1s, or LeaseTTL/3 when that is shorter.
	Round time.Duration
	// Registerer takes hangar_leases_held and hangar_lease_losses_total. Nil: not exported.
	Registerer prometheus.Registerer
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Clock drives the rounds of renewals and takeovers and the waits before reconnecting.
	// Expiries themselves are the database's clock. Default the real clock.
	Clock quartz.Clock
}

// Cluster is this replica's part of the service. Set its handlers (Handle, OnResync, OnLeases)
// before Run.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	pool    *pgxpool.Pool
	channel string // the NOTIFY channel: one per database schema, so tests' schemas never mix

	handlers map[string]func(ctx context.Context, arg string)    // by topic; set before Run
	resync   []func(ctx context.Context)                         // set before Run
	gained   func(ctx context.Context, sandbox string, how Gain) // set before Run
	lost     func(sandbox string)                                // set before Run

	schema string // the database schema: part of the presence lock's key

	scan chan struct{} // a peer released or handed over leases: run a round now

	// presence is the connection that holds this replica's presence lock (presence.go): its
	// session ending is how the others see this replica dead. Used by the rounds and Close.
	presenceMu sync.Mutex
	presence   *pgx.Conn

	mu          sync.Mutex               // guards held, gen, handing and lastRenewed
	held        map[string]uint64        // the sandboxes whose lease this replica holds, with the gen they were gained at
	gen         uint64                   // counts gains: a renewal loses only leases gained before it read the rows
	handing     map[string]chan struct{} // sandboxes being handed to a peer, closed once the lease moved
	leaving     bool                     // Leave was called: no lease is taken any more
	lastRenewed time.Time                // the last renewal the database confirmed

	losses prometheus.Counter // hangar_lease_losses_total; nil without a Registerer

	beforeTake func() // a test's, to hand a lease over between Owner's statements; nil otherwise

	reachMu sync.Mutex          // guards reached
	reached map[string]reaching // live replicas Reach found lately, by id
}

// reaching is where Reach found a live replica, and when.
type reaching struct {
	url string
	at  time.Time
}

// MaxConns is how many connections to the database a replica keeps for its part of the
// service, beside its store's (HANGAR_DATABASE_MAX_CONNS): the listener's, the presence
// lock's (presence.go), and a pool of two for leases, notifications and stream slots, whose
// statements are short. Bounded, so that
// replicas × (store + MaxConns) is a sum an operator can fit under max_connections.
const MaxConns = 4

// New connects to the database and lists this replica. Close it after Run returned.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.DatabaseURL == "" || cfg.AdvertiseURL == "" {
		return nil, errors.New("replicas: the database URL and the advertised URL are required")
	}
	if cfg.ID == "" {
		cfg.ID = ids.New("r_", 12)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.Round <= 0 {
		cfg.Round = min(time.Second, cfg.LeaseTTL/3)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres for replicas: %w", err)
	}
	pcfg.MaxConns = MaxConns - 2 // and the listener's and the presence lock's own
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres for replicas: %w", err)
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger.With("replica", cfg.ID), pool: pool, handlers: map[string]func(context.Context, string){},
		scan: make(chan struct{}, 1), held: map[string]uint64{}, handing: map[string]chan struct{}{}, lastRenewed: cfg.Clock.Now(),
		reached: map[string]reaching{}}
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&c.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read the database schema: %w", err)
	}
	c.channel = "hangar_" + c.schema
	// Present before listed: a peer that finds this replica listed finds it holding its lock.
	if err := c.present(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := c.heartbeat(ctx); err != nil {
		c.absent()
		pool.Close()
		return nil, err
	}
	c.metrics(cfg.Registerer)
	return c, nil
}

// ID is this replica's id.
func (c *Cluster) ID() string { return c.cfg.ID }

// Handle makes fn hear the topic's notifications from the other replicas (never this one's
// own). fn runs on the listener's goroutine: it must not block for long.
func (c *Cluster) Handle(topic string, fn func(ctx context.Context, arg string)) {
	c.handlers[topic] = fn
}

// OnResync makes fn run each time the listener (re)connects: notifications sent while it was
// not listening are lost, so fn catches up from the rows (wakes every reader, say).
func (c *Cluster) OnResync(fn func(ctx context.Context)) {
	c.resync = append(c.resync, fn)
}

// Publish tells the other replicas topic happened to arg (an id: never data, and short: a
// payload is at most 8,000 bytes). A failure is logged: the peers catch up from the rows at
// their next resync or recheck.
func (c *Cluster) Publish(ctx context.Context, topic, arg string) {
	payload := c.cfg.ID + " " + topic + " " + arg
	if _, err := c.pool.Exec(context.WithoutCancel(ctx), `SELECT pg_notify($1, $2)`, c.channel, payload); err != nil {
		c.log.Warn("notify the other replicas", "topic", topic, "arg", arg, "err", err)
	}
}

// Run listens for the other replicas' notifications and keeps this replica's leases until ctx
// ends, then hands its leases to live peers (so they follow its sandboxes at once rather than
// after the lease time) and unlists it. End ctx only once the domain stopped following them
// (see Leave): what the rows say this replica holds is handed over as it is.
func (c *Cluster) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.listen(ctx) }()
	go func() { defer wg.Done(); c.keep(ctx) }()
	wg.Wait()
	c.leave()
}

// Close releases the database connections (the presence lock with them).
func (c *Cluster) Close() {
	c.absent()
	c.pool.Close()
}

// listen holds a connection that LISTENs on the channel, reconnecting (with a growing wait)
// when it breaks, until ctx ends.
func (c *Cluster) listen(ctx context.Context) {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Second}
	for ctx.Err() == nil {
		err := c.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		next := backoff.Step()
		c.log.Warn("listening to the other replicas broke; reconnecting", "err", err, "in", next)
		t := c.cfg.Clock.NewTimer(next, "replicas", "reconnect")
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Listening from here on: what was announced before is read from the rows.
	for _, fn := range c.resync {
		fn(ctx)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a notification: %w", err)
		}
		c.dispatch(ctx, n.Payload)
	}
}

// dispatch hands a notification "<replica> <topic> <arg>" to its topic's handler.
func (c *Cluster) dispatch(ctx context.Context, payload string) {
	from, rest, _ := strings.Cut(payload, " ")
	topic, arg, _ := strings.Cut(rest, " ")
	if from == c.cfg.ID {
		return
	}
	if topic == topicReleased { // arg: the peer it handed leases to, or "" (any may take them)
		select {
		case c.scan <- struct{}{}:
		default: // a scan is due already
		}
		return
	}
	if fn := c.handlers[topic]; fn != nil {
		fn(ctx, arg)
	}
}

// heartbeat lists this replica, or says it is still alive.
func (c *Cluster) heartbeat(ctx context.Context) error {
	_, err := c.pool.Exec(ctx, `INSERT INTO replicas (id, url, started_at, seen_at, present) VALUES ($1, $2, now(), now(), true)
		ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, seen_at = now(), present = true`, c.cfg.ID, c.cfg.AdvertiseURL)
	if err != nil {
		return fmt.Errorf("list replica %s: %w", c.cfg.ID, err)
	}
	return nil
}

// AdvertiseURL is where the other replicas reach this one.
func (c *Cluster) AdvertiseURL() string { return c.cfg.AdvertiseURL }

// Reach returns where the live replica id is reached (its advertised URL), or "" when no
// replica of that id is listed with a heartbeat younger than a lease: it left, it died, or it
// never was. The URL comes from the replicas table only, never from what a client says. A
// replica found live is remembered for a third of a lease (a heartbeat's period), so a burst of
// requests to forward costs the database one read per replica, not one each; one that stopped
// meanwhile is found so by whoever tries to reach it.
func (c *Cluster) Reach(ctx context.Context, id string) (string, error) {
	now := c.cfg.Clock.Now()
	fresh := c.cfg.LeaseTTL / 3
	c.reachMu.Lock()
	r, ok := c.reached[id]
	c.reachMu.Unlock()
	if ok && now.Sub(r.at) < fresh {
		return r.url, nil
	}
	var url string
	err := c.pool.QueryRow(ctx, `SELECT url FROM replicas WHERE id = $1 AND seen_at > now() - $2 * interval '1 millisecond'`,
		id, c.cfg.LeaseTTL.Milliseconds()).Scan(&url)
	c.reachMu.Lock()
	defer c.reachMu.Unlock()
	for other, r := range c.reached {
		if now.Sub(r.at) >= fresh {
			delete(c.reached, other) // only live replicas are kept, a few, and not for long
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find replica %s: %w", id, err)
	}
	c.reached[id] = reaching{url: url, at: now}
	return url, nil
}
