package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

const processColumns = `id, token_id, user_name, sandbox, command, cwd, tag, pid, pty, daemon, state, exit_code, status, started_at, ended_at, output_end, grant_id`

// CreateProcess implements store.Store.
func (s *DB) CreateProcess(ctx context.Context, p store.Process) error {
	var ended int64
	if !p.EndedAt.IsZero() {
		ended = p.EndedAt.UnixMilli()
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO processes (`+processColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		p.ID, p.TokenID, p.User, p.Sandbox, p.Command, p.Cwd, p.Tag, int64(p.PID), p.PTY, p.Daemon, p.State,
		exitCodeArg(p.ExitCode), p.Status, p.StartedAt.UnixMilli(), ended, p.OutputEnd, p.Grant)
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create process %s: %w", p.ID, store.ErrConflict)
		}
		return fmt.Errorf("create process %s: %w", p.ID, err)
	}
	return nil
}

func exitCodeArg(code *int) any {
	if code == nil {
		return nil
	}
	return int64(*code)
}

// EndProcess implements store.Store.
func (s *DB) EndProcess(ctx context.Context, id string, exitCode int, status string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE processes SET state = 'exited', exit_code = ?, status = ?, ended_at = ? WHERE id = ? AND state = 'running'`),
		int64(exitCode), status, at.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("end process %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("end process %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("end process %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// SetProcessOutput implements store.Store.
func (s *DB) SetProcessOutput(ctx context.Context, id string, end int64) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE processes SET output_end = ? WHERE id = ? AND state = 'running'`), end, id)
	if err != nil {
		return fmt.Errorf("record the output of process %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record the output of process %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("record the output of process %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ListRunningProcesses implements store.Store.
func (s *DB) ListRunningProcesses(ctx context.Context) ([]store.Process, error) {
	return s.listProcesses(ctx, `state = 'running'`)
}

// ListProcesses implements store.Store.
func (s *DB) ListProcesses(ctx context.Context, sandbox string, since time.Time) ([]store.Process, error) {
	if sandbox == "" {
		return s.listProcesses(ctx, `(state = 'running' OR ended_at >= ?)`, since.UnixMilli())
	}
	return s.listProcesses(ctx, `sandbox = ? AND (state = 'running' OR ended_at >= ?)`, sandbox, since.UnixMilli())
}

// listProcesses lists the processes where (an SQL condition on args) holds, oldest first.
func (s *DB) listProcesses(ctx context.Context, where string, args ...any) ([]store.Process, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+processColumns+` FROM processes WHERE `+where+` ORDER BY started_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer rows.Close()
	var out []store.Process
	for rows.Next() {
		p, err := scanProcess(rows)
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}

// GetProcess implements store.Store.
func (s *DB) GetProcess(ctx context.Context, id string) (store.Process, error) {
	p, err := scanProcess(s.db.QueryRowContext(ctx, s.q(`SELECT `+processColumns+` FROM processes WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Process{}, fmt.Errorf("process %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Process{}, fmt.Errorf("read process %s: %w", id, err)
	}
	return p, nil
}

func scanProcess(r scanner) (store.Process, error) {
	var (
		p              store.Process
		pid            int64
		code           sql.NullInt64
		started, ended int64
	)
	if err := r.Scan(&p.ID, &p.TokenID, &p.User, &p.Sandbox, &p.Command, &p.Cwd, &p.Tag, &pid, &p.PTY, &p.Daemon,
		&p.State, &code, &p.Status, &started, &ended, &p.OutputEnd, &p.Grant); err != nil {
		return store.Process{}, err
	}
	p.PID = uint32(pid)
	if code.Valid {
		c := int(code.Int64)
		p.ExitCode = &c
	}
	p.StartedAt = time.UnixMilli(started)
	if ended != 0 {
		p.EndedAt = time.UnixMilli(ended)
	}
	return p, nil
}

// DeleteEndedProcesses implements store.Store.
func (s *DB) DeleteEndedProcesses(ctx context.Context, before time.Time) (int, error) {
	return s.deleteRows(ctx, "delete ended processes", `DELETE FROM processes WHERE state <> 'running' AND ended_at < ?`, before.UnixMilli())
}
