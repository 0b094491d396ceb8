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

const sandboxColumns = `name, owner, provider, provider_id, state, reason, image, template, workdir, env, daemon, daemon_url, daemon_token, data, metadata, end_at, on_timeout, created_at, updated_at`

// CreateSandbox implements store.Store.
func (s *DB) CreateSandbox(ctx context.Context, sb store.Sandbox) error {
	env, data, err := sandboxMaps(sb)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(nonNil(sb.Metadata))
	if err != nil {
		return fmt.Errorf("encode sandbox %s metadata: %w", sb.Name, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.Name, err)
	}
	defer tx.Rollback()
	// Only a destroyed sandbox gives up its name, and a failed one to its own owner.
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sandboxes WHERE name = ? AND (state = 'destroyed' OR (state = 'failed' AND owner = ?))`), sb.Name, sb.Owner); err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.Name, err)
	}
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		sb.Name, sb.Owner, sb.Provider, sb.ProviderID, sb.State, sb.Reason, sb.Image, sb.Template, sb.Workdir, env,
		sb.Daemon, sb.DaemonURL, sb.DaemonToken, data, string(meta), endMillis(sb.EndAt), sb.OnTimeout, sb.CreatedAt.UnixMilli(), sb.UpdatedAt.UnixMilli())
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create sandbox %s: %w", sb.Name, store.ErrConflict)
		}
		return fmt.Errorf("create sandbox %s: %w", sb.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.Name, err)
	}
	return nil
}

// GetSandbox implements store.Store.
func (s *DB) GetSandbox(ctx context.Context, name string) (store.Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, s.q(`SELECT `+sandboxColumns+` FROM sandboxes WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Sandbox{}, fmt.Errorf("sandbox %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("read sandbox %s: %w", name, err)
	}
	return sb, nil
}

// ListSandboxes implements store.Store.
func (s *DB) ListSandboxes(ctx context.Context, owner string) ([]store.Sandbox, error) {
	query, args := `SELECT `+sandboxColumns+` FROM sandboxes`, []any{}
	if owner != "" {
		query += ` WHERE owner = ?`
		args = append(args, owner)
	}
	return s.querySandboxes(ctx, "list sandboxes", query+` ORDER BY name`, args...)
}

// querySandboxes reads the sandboxes query selects (sandboxColumns); what names it in errors.
func (s *DB) querySandboxes(ctx context.Context, what, query string, args ...any) ([]store.Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, sb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// UpdateSandbox implements store.Store.
func (s *DB) UpdateSandbox(ctx context.Context, sb store.Sandbox) error {
	env, data, err := sandboxMaps(sb)
	if err != nil {
		return err
	}
	// One statement, so that no destroy or create of the name can come between the check and
	// the write.
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE sandboxes SET provider_id = ?, state = ?, reason = ?, image = ?, template = ?, workdir = ?, env = ?, daemon = ?, daemon_url = ?, daemon_token = ?, data = ?, updated_at = ? WHERE name = ? AND created_at = ? AND state <> 'destroyed'`),
		sb.ProviderID, sb.State, sb.Reason, sb.Image, sb.Template, sb.Workdir, env, sb.Daemon, sb.DaemonURL, sb.DaemonToken, data, sb.UpdatedAt.UnixMilli(), sb.Name, sb.CreatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", sb.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update sandbox %s: %w", sb.Name, err)
	} else if n > 0 {
		return nil
	}
	if _, err := s.GetSandbox(ctx, sb.Name); err != nil {
		return fmt.Errorf("update sandbox %s: %w", sb.Name, err)
	}
	return fmt.Errorf("update sandbox %s: it was destroyed, or its name taken by another, meanwhile: %w", sb.Name, store.ErrConflict)
}

// SetSandboxEnd implements store.Store.
func (s *DB) SetSandboxEnd(ctx context.Context, name string, createdAt, endAt time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE sandboxes SET end_at = ? WHERE name = ? AND created_at = ? AND state <> 'destroyed'`),
		endMillis(endAt), name, createdAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("set sandbox %s end: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set sandbox %s end: %w", name, err)
	} else if n > 0 {
		return nil
	}
	if _, err := s.GetSandbox(ctx, name); err != nil {
		return fmt.Errorf("set sandbox %s end: %w", name, err)
	}
	return fmt.Errorf("set sandbox %s end: it was destroyed, or its name taken by another, meanwhile: %w", name, store.ErrConflict)
}

// DueSandboxes implements store.Store.
func (s *DB) DueSandboxes(ctx context.Context, at time.Time, limit int) ([]store.Sandbox, error) {
	return s.querySandboxes(ctx, "list due sandboxes", `SELECT `+sandboxColumns+` FROM sandboxes WHERE end_at > 0 AND end_at <= ? AND state = 'running' ORDER BY end_at, name LIMIT ?`,
		at.UnixMilli(), limit)
}

// endMillis is a sandbox's end as stored: Unix milliseconds, 0 for none.
func endMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func sandboxMaps(sb store.Sandbox) (env, data string, err error) {
	e, err := json.Marshal(nonNil(sb.Env))
	if err != nil {
		return "", "", fmt.Errorf("encode sandbox %s env: %w", sb.Name, err)
	}
	d, err := json.Marshal(nonNil(sb.Data))
	if err != nil {
		return "", "", fmt.Errorf("encode sandbox %s data: %w", sb.Name, err)
	}
	return string(e), string(d), nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func scanSandbox(r scanner) (store.Sandbox, error) {
	var (
		sb               store.Sandbox
		env, data, meta  string
		created, updated int64
		end              int64
	)
	if err := r.Scan(&sb.Name, &sb.Owner, &sb.Provider, &sb.ProviderID, &sb.State, &sb.Reason, &sb.Image, &sb.Template,
		&sb.Workdir, &env, &sb.Daemon, &sb.DaemonURL, &sb.DaemonToken, &data, &meta, &end, &sb.OnTimeout, &created, &updated); err != nil {
		return store.Sandbox{}, err
	}
	if err := json.Unmarshal([]byte(meta), &sb.Metadata); err != nil {
		return store.Sandbox{}, fmt.Errorf("decode metadata: %w", err)
	}
	if end > 0 {
		sb.EndAt = time.UnixMilli(end)
	}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return store.Sandbox{}, fmt.Errorf("decode env: %w", err)
	}
	if err := json.Unmarshal([]byte(data), &sb.Data); err != nil {
		return store.Sandbox{}, fmt.Errorf("decode data: %w", err)
	}
	sb.CreatedAt, sb.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return sb, nil
}
