package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// CreateTicket implements store.Store. The count and the insert are one statement, so a token
// asking on several replicas at once passes max by at most the asks in flight.
func (s *DB) CreateTicket(ctx context.Context, t store.Ticket, max int, now time.Time) error {
	var tokenExpires int64
	if !t.TokenExpiresAt.IsZero() {
		tokenExpires = t.TokenExpiresAt.UnixMilli()
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO fleet_tickets (hash, token_id, user_name, token_expires_at, static, expires_at)
		SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM fleet_tickets WHERE token_id = ? AND expires_at > ?) < ?`),
		t.Hash, t.TokenID, t.User, tokenExpires, t.Static, t.ExpiresAt.UnixMilli(), t.TokenID, now.UnixMilli(), int64(max))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create ticket: %w", store.ErrConflict)
		}
		return fmt.Errorf("create ticket: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create ticket: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create ticket: token %s holds %d unused tickets: %w", t.TokenID, max, store.ErrLimit)
	}
	return nil
}

// RedeemTicket implements store.Store: the DELETE makes it one use across replicas.
func (s *DB) RedeemTicket(ctx context.Context, hash string, now time.Time) (store.Ticket, error) {
	var t store.Ticket
	var tokenExpires, expires int64
	err := s.db.QueryRowContext(ctx, s.q(`DELETE FROM fleet_tickets WHERE hash = ?
		RETURNING hash, token_id, user_name, token_expires_at, static, expires_at`), hash).
		Scan(&t.Hash, &t.TokenID, &t.User, &tokenExpires, &t.Static, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Ticket{}, fmt.Errorf("redeem ticket: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Ticket{}, fmt.Errorf("redeem ticket: %w", err)
	}
	if tokenExpires != 0 {
		t.TokenExpiresAt = time.UnixMilli(tokenExpires)
	}
	t.ExpiresAt = time.UnixMilli(expires)
	if !now.Before(t.ExpiresAt) {
		return store.Ticket{}, fmt.Errorf("redeem ticket: expired: %w", store.ErrNotFound)
	}
	return t, nil
}

// DeleteExpiredTickets implements store.Store.
func (s *DB) DeleteExpiredTickets(ctx context.Context, now time.Time) (int, error) {
	return s.deleteRows(ctx, "delete expired tickets", `DELETE FROM fleet_tickets WHERE expires_at <= ?`, now.UnixMilli())
}

// DismissInbox implements store.Store.
func (s *DB) DismissInbox(ctx context.Context, user, item string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO inbox_dismissals (user_name, item_id, dismissed_at) VALUES (?, ?, ?)
		ON CONFLICT (user_name, item_id) DO NOTHING`), user, item, at.UnixMilli()); err != nil {
		return fmt.Errorf("dismiss inbox item %s: %w", item, err)
	}
	return nil
}

// DismissedInbox implements store.Store.
func (s *DB) DismissedInbox(ctx context.Context, user string, since time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT item_id FROM inbox_dismissals WHERE user_name = ? AND dismissed_at >= ? ORDER BY item_id`),
		user, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list dismissed inbox items: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list dismissed inbox items: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dismissed inbox items: %w", err)
	}
	return out, nil
}

// DeleteDismissals implements store.Store.
func (s *DB) DeleteDismissals(ctx context.Context, before time.Time) (int, error) {
	return s.deleteRows(ctx, "delete dismissals", `DELETE FROM inbox_dismissals WHERE dismissed_at < ?`, before.UnixMilli())
}
