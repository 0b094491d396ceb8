package replicas

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Presence: each replica holds a PostgreSQL session-level advisory lock, keyed by its schema
// and its id, on a connection of its own for as long as it runs. A replica killed with
// SIGKILL, or whose machine's kernel closes its sockets, loses its session and with it the
// lock at once; a peer that can take a listed replica's lock (for a moment, inside a
// transaction) knows that replica is gone and takes its leases over in its next round,
// without waiting for them to expire. A replica cut off without its socket closing (a network
// partition, a frozen VM) keeps its session until PostgreSQL's TCP keepalive gives up; then
// its leases expire after LeaseTTL, the bound that stays.
//
// The lock's key is hashtextextended of "hangar replica <schema> <id>": tests run many schemas
// in one database, and two replicas' ids must never share a key in practice (64 bits).

// presenceKey is the SQL expression of a replica's lock key, from the schema ($schema) and the
// replica id column or parameter given.
func presenceKey(schema, id string) string {
	return "hashtextextended('hangar replica ' || " + schema + " || ' ' || " + id + ", 0)"
}

// present connects the presence connection and takes this replica's lock on it. A lock held
// already (the previous session of this very replica, not yet dropped by the server) is
// taken once that session ends: a round tries again.
func (c *Cluster) present(ctx context.Context) error {
	c.presenceMu.Lock()
	defer c.presenceMu.Unlock()
	if c.presence != nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, c.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgres to hold replica %s's presence: %w", c.cfg.ID, err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+presenceKey("$1::text", "$2::text")+`)`, c.schema, c.cfg.ID).Scan(&got); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("take replica %s's presence lock: %w", c.cfg.ID, err)
	}
	if !got {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("take replica %s's presence lock: another session holds it (an earlier one of this replica that the database has not dropped yet)", c.cfg.ID)
	}
	c.presence = conn
	return nil
}

// stillPresent checks the presence connection, reconnecting it when it broke. It reports
// false when the session was lost: the peers may have seen this replica dead meanwhile and
// taken its leases, so it must stop following them (its renewal then says which it keeps).
func (c *Cluster) stillPresent(ctx context.Context) bool {
	c.presenceMu.Lock()
	conn := c.presence
	c.presenceMu.Unlock()
	if conn != nil && conn.Ping(ctx) == nil {
		return true
	}
	c.absent()
	if err := c.present(ctx); err != nil {
		c.log.Warn("hold this replica's presence", "err", err)
	}
	return false
}

// absent closes the presence connection: the peers see this replica gone at their next round.
func (c *Cluster) absent() {
	c.presenceMu.Lock()
	defer c.presenceMu.Unlock()
	if c.presence != nil {
		c.presence.Close(context.Background())
		c.presence = nil
	}
}

// reap finds the listed replicas (other than this one, and of a hangar that holds one) that
// hold no presence lock, and unlists
// them: their leases are released (expired now) for the live replicas to take, their stream
// counts dropped. It returns their ids. Trying a dead replica's lock takes it only until the
// transaction ends.
func (c *Cluster) reap(ctx context.Context) ([]string, error) {
	var dead []string
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		// A lease of a replica no longer listed (it left, handed a lease by a peer as it did,
		// or was found dead) is free for the rounds to take now, not at its expiry.
		if _, err := tx.Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 millisecond'
			WHERE expires_at >= now() AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = leases.replica)`); err != nil {
			return err
		}
		// Only a replica that says it holds a presence lock: an older hangar, during an upgrade,
		// holds none, and reaping it would move its leases back and forth every round (it
		// lists itself again and takes back expired leases); its leases move when they expire.
		rows, err := tx.Query(ctx, `SELECT id FROM replicas WHERE id <> $2 AND present AND pg_try_advisory_xact_lock(`+presenceKey("$1::text", "id")+`)`,
			c.schema, c.cfg.ID)
		if err != nil {
			return err
		}
		if dead, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(dead) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE replica = ANY($1)`, dead); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM stream_slots WHERE replica = ANY($1)`, dead); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM replicas WHERE id = ANY($1)`, dead)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look for dead replicas: %w", err)
	}
	for _, id := range dead {
		c.log.Warn("a replica is gone (its database session ended): its sandboxes are taken over now", "gone", id)
	}
	return dead, nil
}

// Unreachable is what a forwarding that could not reach the replica at url calls: it looks for
// dead replicas now rather than at the next round, so the caller, asking the owner again,
// finds the sandbox's lease free to take when that replica is gone.
func (c *Cluster) Unreachable(ctx context.Context, url string) {
	if _, err := c.reap(ctx); err != nil {
		c.log.Warn("look for dead replicas after one did not answer", "url", url, "err", err)
	}
}
