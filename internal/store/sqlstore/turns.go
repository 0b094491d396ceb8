package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

const sessionColumns = `id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at, split, split_uid`

// sessionSelect is what a read of a session selects: its columns and its newest turn's state
// (turns_session serves the subquery).
const sessionSelect = sessionColumns + `, COALESCE((SELECT t.state FROM turns t WHERE t.session_id = sessions.id
	ORDER BY t.created_at DESC, t.id DESC LIMIT 1), '')`

// CreateSession implements store.Store.
func (s *DB) CreateSession(ctx context.Context, se store.Session) error {
	env, err := json.Marshal(orEmpty(se.Env))
	if err != nil {
		return fmt.Errorf("create session %s: %w", se.Name, err)
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`),
		se.ID, se.Name, se.Owner, se.TokenID, se.Sandbox, se.Agent, string(env), se.JobID, se.CreatedAt.UnixMilli(), se.Split, int64(se.SplitUID))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create session %s: %w", se.Name, store.ErrConflict)
		}
		return fmt.Errorf("create session %s: %w", se.Name, err)
	}
	return nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// GetSession implements store.Store. An id wins over a name (ids have a prefix names may
// also have).
func (s *DB) GetSession(ctx context.Context, owner, ref string) (store.Session, error) {
	se, err := scanSession(s.db.QueryRowContext(ctx, s.q(`SELECT `+sessionSelect+` FROM sessions
		WHERE id = ? OR (owner = ? AND owner <> '' AND name = ?) ORDER BY id = ? DESC LIMIT 1`), ref, owner, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("session %s: %w", ref, store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("read session %s: %w", ref, err)
	}
	return se, nil
}

// ListSessions implements store.Store.
func (s *DB) ListSessions(ctx context.Context, owner string) ([]store.Session, error) {
	query, args := `SELECT `+sessionSelect+` FROM sessions`, []any{}
	if owner != "" {
		query += ` WHERE owner = ?`
		args = append(args, owner)
	}
	return list(ctx, s, "list sessions", query+` ORDER BY name`, args, scanSession)
}

func scanSession(r scanner) (store.Session, error) {
	var (
		se       store.Session
		env      string
		created  int64
		splitUID int64
	)
	if err := r.Scan(&se.ID, &se.Name, &se.Owner, &se.TokenID, &se.Sandbox, &se.Agent, &env, &se.JobID, &se.LastSeq, &created,
		&se.Split, &splitUID, &se.LastTurnState); err != nil {
		return store.Session{}, err
	}
	se.SplitUID = uint32(splitUID)
	if err := json.Unmarshal([]byte(env), &se.Env); err != nil {
		return store.Session{}, fmt.Errorf("decode env: %w", err)
	}
	se.CreatedAt = time.UnixMilli(created)
	return se, nil
}

// list runs a query and scans every row.
func list[T any](ctx context.Context, s *DB, what, query string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// SetSessionEnv implements store.Store.
func (s *DB) SetSessionEnv(ctx context.Context, id string, env map[string]string) error {
	b, err := json.Marshal(orEmpty(env))
	if err != nil {
		return fmt.Errorf("set env of session %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE sessions SET env = ? WHERE id = ?`), string(b), id)
	if err != nil {
		return fmt.Errorf("set env of session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set env of session %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("set env of session %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteSession implements store.Store.
func (s *DB) DeleteSession(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q(`DELETE FROM sessions WHERE id = ?`), id)
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
	}
	for _, table := range []string{"events", "turns"} {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE session_id = ?`), id); err != nil {
			return fmt.Errorf("delete session %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

const turnColumns = `id, session_id, job_id, prompt, state, dir, process_tag, process_pid, read_pos, exit_code, signal, summary, reason, created_at, started_at, ended_at, process_start, cancel_requested, launching`

// CreateTurn implements store.Store.
func (s *DB) CreateTurn(ctx context.Context, t store.Turn) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO turns (`+turnColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, t.SessionID, t.JobID, t.Prompt, t.State, t.Dir, t.ProcessTag, int64(t.ProcessPID), t.ReadPos,
		exitCodeArg(t.ExitCode), t.Signal, t.Summary, t.Reason, t.CreatedAt.UnixMilli(), zeroMillis(t.StartedAt), zeroMillis(t.EndedAt),
		int64(t.ProcessStart), t.CancelRequested, t.Launching)
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create turn %s: %w", t.ID, store.ErrConflict)
		}
		return fmt.Errorf("create turn %s: %w", t.ID, err)
	}
	return nil
}

// zeroMillis maps the zero time to 0.
func zeroMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromZeroMillis(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// GetTurn implements store.Store.
func (s *DB) GetTurn(ctx context.Context, id string) (store.Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, s.q(`SELECT `+turnColumns+` FROM turns WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Turn{}, fmt.Errorf("turn %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Turn{}, fmt.Errorf("read turn %s: %w", id, err)
	}
	return t, nil
}

// ListTurns implements store.Store.
func (s *DB) ListTurns(ctx context.Context, sessionID string) ([]store.Turn, error) {
	return list(ctx, s, "list turns", `SELECT `+turnColumns+` FROM turns WHERE session_id = ? ORDER BY created_at, id`, []any{sessionID}, scanTurn)
}

// ListActiveTurns implements store.Store.
func (s *DB) ListActiveTurns(ctx context.Context) ([]store.Turn, error) {
	return list(ctx, s, "list active turns", `SELECT `+turnColumns+` FROM turns WHERE state IN ('queued', 'running') ORDER BY created_at, id`, nil, scanTurn)
}

func scanTurn(r scanner) (store.Turn, error) {
	var (
		t                       store.Turn
		pid, pstart             int64
		code                    sql.NullInt64
		created, started, ended int64
	)
	if err := r.Scan(&t.ID, &t.SessionID, &t.JobID, &t.Prompt, &t.State, &t.Dir, &t.ProcessTag, &pid, &t.ReadPos,
		&code, &t.Signal, &t.Summary, &t.Reason, &created, &started, &ended, &pstart, &t.CancelRequested, &t.Launching); err != nil {
		return store.Turn{}, err
	}
	t.ProcessPID, t.ProcessStart = uint32(pid), uint64(pstart)
	if code.Valid {
		c := int(code.Int64)
		t.ExitCode = &c
	}
	t.CreatedAt, t.StartedAt, t.EndedAt = time.UnixMilli(created), fromZeroMillis(started), fromZeroMillis(ended)
	return t, nil
}

// UpdateTurn implements store.Store.
func (s *DB) UpdateTurn(ctx context.Context, u store.TurnUpdate) error {
	return s.updateTurn(ctx, s.db, u)
}

// execQuerier is what a statement runs on: the database, or a transaction.
type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// updateTurn is UpdateTurn on db, which may be a transaction.
func (s *DB) updateTurn(ctx context.Context, db execQuerier, u store.TurnUpdate) error {
	var (
		res sql.Result
		err error
	)
	switch {
	case u.State == store.TurnRunning:
		res, err = db.ExecContext(ctx, s.q(`UPDATE turns SET state = ?, dir = ?, process_tag = ?, process_pid = ?, process_start = ?, started_at = ? WHERE id = ? AND state = 'queued'`),
			u.State, u.Dir, u.ProcessTag, int64(u.ProcessPID), int64(u.ProcessStart), zeroMillis(u.StartedAt), u.ID)
	case store.TurnEnded(u.State):
		res, err = db.ExecContext(ctx, s.q(`UPDATE turns SET state = ?, exit_code = ?, signal = ?, summary = ?, reason = ?, ended_at = ?,
			started_at = CASE WHEN started_at = 0 THEN ? ELSE started_at END WHERE id = ? AND state IN ('queued', 'running')`),
			u.State, exitCodeArg(u.ExitCode), u.Signal, u.Summary, u.Reason, zeroMillis(u.EndedAt), zeroMillis(u.StartedAt), u.ID)
	default:
		return fmt.Errorf("update turn %s: no move to state %q: %w", u.ID, u.State, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("update turn %s: %w", u.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update turn %s: %w", u.ID, err)
	} else if n == 1 {
		return nil
	}
	var state string
	err = db.QueryRowContext(ctx, s.q(`SELECT state FROM turns WHERE id = ?`), u.ID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("update turn: turn %s: %w", u.ID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update turn: %w", err)
	}
	return fmt.Errorf("update turn %s from %s to %s: %w", u.ID, state, u.State, store.ErrConflict)
}

// BeginLaunch implements store.Store.
func (s *DB) BeginLaunch(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE turns SET launching = ? WHERE id = ? AND state = 'queued' AND launching = ?`), true, id, false)
	if err != nil {
		return fmt.Errorf("begin the launch of turn %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("begin the launch of turn %s: %w", id, err)
	} else if n == 1 {
		return nil
	}
	t, err := s.GetTurn(ctx, id)
	if err != nil {
		return fmt.Errorf("begin the launch: %w", err)
	}
	if t.State == store.TurnQueued {
		return fmt.Errorf("begin the launch of turn %s: it began already: %w", id, store.ErrConflict)
	}
	return fmt.Errorf("begin the launch of turn %s: it is %s: %w", id, t.State, store.ErrConflict)
}

// RequestCancel implements store.Store.
func (s *DB) RequestCancel(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE turns SET cancel_requested = ? WHERE id = ? AND state IN ('queued', 'running')`), true, id)
	if err != nil {
		return fmt.Errorf("cancel turn %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("cancel turn %s: %w", id, err)
	} else if n == 1 {
		return nil
	}
	t, err := s.GetTurn(ctx, id)
	if err != nil {
		return fmt.Errorf("cancel turn: %w", err)
	}
	return fmt.Errorf("cancel turn %s: it is %s: %w", id, t.State, store.ErrConflict)
}

const jobColumns = `id, token_id, owner, sandbox, sandbox_created, session_id, turn_id, last_seq, created_at`

// CreateJob implements store.Store.
func (s *DB) CreateJob(ctx context.Context, j store.Job) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO jobs (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)`),
		j.ID, j.TokenID, j.Owner, j.Sandbox, j.SandboxCreated, j.SessionID, j.TurnID, j.CreatedAt.UnixMilli())
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create job %s: %w", j.ID, store.ErrConflict)
		}
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return nil
}

// GetJob implements store.Store.
func (s *DB) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, s.q(`SELECT `+jobColumns+` FROM jobs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Job{}, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs implements store.Store.
func (s *DB) ListJobs(ctx context.Context, tokenID, owner string) ([]store.Job, error) {
	query, args := `SELECT `+jobColumns+` FROM jobs WHERE 1 = 1`, []any{}
	if tokenID != "" {
		query += ` AND token_id = ?`
		args = append(args, tokenID)
	}
	if owner != "" {
		query += ` AND owner = ?`
		args = append(args, owner)
	}
	return list(ctx, s, "list jobs", query+` ORDER BY created_at, id`, args, scanJob)
}

func scanJob(r scanner) (store.Job, error) {
	var (
		j       store.Job
		created int64
	)
	if err := r.Scan(&j.ID, &j.TokenID, &j.Owner, &j.Sandbox, &j.SandboxCreated, &j.SessionID, &j.TurnID, &j.LastSeq, &created); err != nil {
		return store.Job{}, err
	}
	j.CreatedAt = time.UnixMilli(created)
	return j, nil
}
