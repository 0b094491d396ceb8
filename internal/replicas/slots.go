package replicas

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Take counts one more open stream under key (a token's id, a grant's or a user's: see
// stream.SharedCounts) on this replica, unless the live replicas (those whose heartbeat is
// younger than a lease) hold max under it already; then it reports false. Two replicas
// admitting streams under the same key at once take turns on an advisory lock of the key, so
// they cannot both pass the limit. (The column is token_id for history: it holds any key.)
func (c *Cluster) Take(ctx context.Context, token string, max int) (bool, error) {
	ok := false
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('hangar stream slots ' || $1))`, token); err != nil {
			return err
		}
		var open int
		err := tx.QueryRow(ctx, `SELECT COALESCE(SUM(s.open), 0) FROM stream_slots s JOIN replicas r ON r.id = s.replica
			WHERE s.token_id = $1 AND r.seen_at > now() - $2 * interval '1 millisecond'`, token, c.cfg.LeaseTTL.Milliseconds()).Scan(&open)
		if err != nil {
			return err
		}
		if open >= max {
			return nil
		}
		ok = true
		_, err = tx.Exec(ctx, `INSERT INTO stream_slots (replica, token_id, open) VALUES ($1, $2, 1)
			ON CONFLICT (replica, token_id) DO UPDATE SET open = stream_slots.open + 1`, c.cfg.ID, token)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("count the streams of token %s: %w", token, err)
	}
	return ok, nil
}

// Give counts one fewer open stream under key (token) on this replica. A failure is logged: the count
// stays one too high until this replica leaves (or is seen dead) and its counts go with it.
func (c *Cluster) Give(token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.pool.Exec(ctx, `UPDATE stream_slots SET open = open - 1 WHERE replica = $1 AND token_id = $2`, c.cfg.ID, token)
	if err == nil {
		_, err = c.pool.Exec(ctx, `DELETE FROM stream_slots WHERE replica = $1 AND token_id = $2 AND open <= 0`, c.cfg.ID, token)
	}
	if err != nil {
		c.log.Warn("count a token's stream closed", "token", token, "err", err)
	}
}

// forgetDead unlists the replicas unseen for ten lease times, with their stream counts (which
// Take already ignores once their heartbeat is a lease old).
func (c *Cluster) forgetDead(ctx context.Context) error {
	_, err := c.pool.Exec(ctx, `DELETE FROM replicas WHERE seen_at < now() - $1 * interval '1 millisecond'`, 10*c.cfg.LeaseTTL.Milliseconds())
	if err == nil {
		_, err = c.pool.Exec(ctx, `DELETE FROM stream_slots s WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = s.replica)`)
	}
	return err
}
