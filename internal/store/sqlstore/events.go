package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

const eventColumns = `session_id, seq, job_id, job_seq, turn_id, ts, type, data, invalid, truncated`

// AppendEvents implements store.Store. The seqs come from the session's (and job's) last_seq,
// advanced by an UPDATE ... RETURNING inside the transaction: the row lock (PostgreSQL) or the
// immediate write lock (SQLite) orders concurrent appends, so numbers are never shared or
// skipped.
func (s *DB) AppendEvents(ctx context.Context, a store.EventAppend) ([]store.Event, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("append events to session %s: %w", a.SessionID, err)
	}
	defer tx.Rollback()
	// Rows are locked in one order, sessions, jobs, then turns, as DeleteSession does
	// (sessions, then turns), so that the two never wait on each other; whatever fails after a
	// lock is rolled back with it.
	n := int64(len(a.Events))
	last, err := s.advance(ctx, tx, "sessions", a.SessionID, n)
	if err != nil {
		return nil, fmt.Errorf("append events to session %s: %w", a.SessionID, err)
	}
	var lastJob int64
	if a.JobID != "" {
		if lastJob, err = s.advance(ctx, tx, "jobs", a.JobID, n); err != nil {
			return nil, fmt.Errorf("append events to job %s: %w", a.JobID, err)
		}
	}
	if a.End != nil {
		if err := s.updateTurn(ctx, tx, *a.End); err != nil {
			return nil, err
		}
	}
	if a.ReadPos >= 0 {
		if err := s.moveReadPos(ctx, tx, a); err != nil {
			return nil, err
		}
	}
	out := make([]store.Event, len(a.Events))
	for i, e := range a.Events {
		e.SessionID, e.JobID, e.TurnID = a.SessionID, a.JobID, a.TurnID
		e.Seq = last - n + int64(i) + 1
		if a.JobID != "" {
			e.JobSeq = lastJob - n + int64(i) + 1
		}
		e.TS = time.UnixMilli(e.TS.UnixMilli())
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO events (`+eventColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			e.SessionID, e.Seq, e.JobID, e.JobSeq, e.TurnID, e.TS.UnixMilli(), e.Type, string(e.Data), e.Invalid, e.Truncated); err != nil {
			return nil, fmt.Errorf("append events to session %s: %w", a.SessionID, err)
		}
		out[i] = e
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("append events to session %s: %w", a.SessionID, err)
	}
	return out, nil
}

// moveReadPos moves the turn's read position from a.FromPos to a.ReadPos, or fails with
// ErrConflict when it is elsewhere.
func (s *DB) moveReadPos(ctx context.Context, tx *sql.Tx, a store.EventAppend) error {
	res, err := tx.ExecContext(ctx, s.q(`UPDATE turns SET read_pos = ? WHERE id = ? AND read_pos = ?`), a.ReadPos, a.TurnID, a.FromPos)
	if err != nil {
		return fmt.Errorf("move read position of turn %s: %w", a.TurnID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("move read position of turn %s: %w", a.TurnID, err)
	} else if n == 1 {
		return nil
	}
	var pos int64
	err = tx.QueryRowContext(ctx, s.q(`SELECT read_pos FROM turns WHERE id = ?`), a.TurnID).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("turn %s: %w", a.TurnID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("move read position of turn %s: %w", a.TurnID, err)
	}
	return fmt.Errorf("move read position of turn %s from %d: it is at %d: %w", a.TurnID, a.FromPos, pos, store.ErrConflict)
}

// advance adds n to a row's last_seq and returns the new value.
func (s *DB) advance(ctx context.Context, tx *sql.Tx, table, id string, n int64) (int64, error) {
	var last int64
	err := tx.QueryRowContext(ctx, s.q(`UPDATE `+table+` SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq`), n, id).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%s %s: %w", table, id, store.ErrNotFound)
	}
	return last, err
}

// ListEvents implements store.Store.
func (s *DB) ListEvents(ctx context.Context, sessionID string, since int64, limit int) ([]store.Event, error) {
	return list(ctx, s, "list events", `SELECT `+eventColumns+` FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		[]any{sessionID, since, limit}, scanEvent)
}

// ListJobEvents implements store.Store.
func (s *DB) ListJobEvents(ctx context.Context, jobID string, since int64, limit int) ([]store.Event, error) {
	return list(ctx, s, "list job events", `SELECT `+eventColumns+` FROM events WHERE job_id = ? AND job_seq > ? ORDER BY job_seq LIMIT ?`,
		[]any{jobID, since, limit}, scanEvent)
}

func scanEvent(r scanner) (store.Event, error) {
	var (
		e    store.Event
		ts   int64
		data string
	)
	if err := r.Scan(&e.SessionID, &e.Seq, &e.JobID, &e.JobSeq, &e.TurnID, &ts, &e.Type, &data, &e.Invalid, &e.Truncated); err != nil {
		return store.Event{}, err
	}
	e.TS, e.Data = time.UnixMilli(ts), []byte(data)
	return e, nil
}

// DeleteEventsBefore implements store.Store.
func (s *DB) DeleteEventsBefore(ctx context.Context, before time.Time) (int, error) {
	return s.deleteRows(ctx, "delete old events", `DELETE FROM events WHERE ts < ?`, before.UnixMilli())
}

// deleteRows runs a DELETE and says how many rows it removed; op names it in errors.
func (s *DB) deleteRows(ctx context.Context, op, query string, args ...any) (int, error) {
	res, err := s.db.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return int(n), nil
}
