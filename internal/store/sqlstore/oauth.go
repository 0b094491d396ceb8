package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// execer is what *sql.DB and *sql.Tx share for statements without rows.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateOAuthClient implements store.Store.
func (s *DB) CreateOAuthClient(ctx context.Context, c store.OAuthClient) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES (?, ?, ?, ?)`),
		c.ID, c.Name, strings.Join(c.RedirectURIs, "\n"), c.CreatedAt.UnixMilli())
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("insert oauth client %s: %w", c.ID, store.ErrConflict)
		}
		return fmt.Errorf("insert oauth client %s: %w", c.ID, err)
	}
	return nil
}

// GetOAuthClient implements store.Store.
func (s *DB) GetOAuthClient(ctx context.Context, id string) (store.OAuthClient, error) {
	var (
		c       = store.OAuthClient{ID: id}
		uris    string
		created int64
	)
	err := s.db.QueryRowContext(ctx, s.q(`SELECT name, redirect_uris, created_at FROM oauth_clients WHERE id = ?`), id).Scan(&c.Name, &uris, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthClient{}, fmt.Errorf("oauth client %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("read oauth client %s: %w", id, err)
	}
	c.RedirectURIs = strings.Split(uris, "\n")
	c.CreatedAt = time.UnixMilli(created)
	return c, nil
}

const grantColumns = `id, client_id, client_name, user_name, scopes, sandbox, resource, consent_token, created_at, revoked_at`

// CreateOAuthGrant implements store.Store.
func (s *DB) CreateOAuthGrant(ctx context.Context, g store.OAuthGrant, code store.OAuthCode) error {
	return s.CreateOAuthGrantWithin(ctx, g, code, 0, time.Time{})
}

// CreateOAuthGrantWithin implements store.Store.
func (s *DB) CreateOAuthGrantWithin(ctx context.Context, g store.OAuthGrant, code store.OAuthCode, max int, at time.Time) error {
	err := s.within(ctx, g.User, max, at, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO oauth_grants (`+grantColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`),
			g.ID, g.ClientID, g.ClientName, g.User, strings.Join(g.Scopes, ","), g.Sandbox, g.Resource, g.ConsentToken, g.CreatedAt.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO oauth_codes (hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES (?, ?, ?, ?, ?)`),
			code.Hash, g.ID, code.RedirectURI, code.CodeChallenge, code.ExpiresAt.UnixMilli()); err != nil {
			return fmt.Errorf("code: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create grant %s: %w", g.ID, err)
	}
	return nil
}

func scanGrant(r scanner) (store.OAuthGrant, error) {
	var (
		g       store.OAuthGrant
		scopes  string
		created int64
		revoked sql.NullInt64
	)
	if err := r.Scan(&g.ID, &g.ClientID, &g.ClientName, &g.User, &scopes, &g.Sandbox, &g.Resource, &g.ConsentToken, &created, &revoked); err != nil {
		return store.OAuthGrant{}, err
	}
	if scopes != "" {
		g.Scopes = strings.Split(scopes, ",")
	}
	g.CreatedAt = time.UnixMilli(created)
	g.RevokedAt = fromMillis(revoked)
	return g, nil
}

// GetOAuthGrant implements store.Store.
func (s *DB) GetOAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error) {
	g, err := scanGrant(s.db.QueryRowContext(ctx, s.q(`SELECT `+grantColumns+` FROM oauth_grants WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthGrant{}, fmt.Errorf("grant %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("read grant %s: %w", id, err)
	}
	return g, nil
}

// ListOAuthGrants implements store.Store.
func (s *DB) ListOAuthGrants(ctx context.Context, user string) ([]store.OAuthGrant, error) {
	query, args := `SELECT `+grantColumns+` FROM oauth_grants WHERE revoked_at IS NULL`, []any{}
	if user != "" {
		query += ` AND user_name = ?`
		args = append(args, user)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+` ORDER BY created_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	defer rows.Close()
	var out []store.OAuthGrant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("list grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return out, nil
}

// RevokeOAuthGrant implements store.Store.
func (s *DB) RevokeOAuthGrant(ctx context.Context, id string, at time.Time) ([]string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q(`UPDATE oauth_grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), at.UnixMilli(), id)
	if err != nil {
		return nil, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("revoke grant %s: %w", id, err)
	} else if n == 0 {
		return nil, fmt.Errorf("revoke grant %s: %w", id, store.ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, s.q(`SELECT id FROM tokens WHERE grant_id = ? AND revoked_at IS NULL ORDER BY id`), id)
	if err != nil {
		return nil, fmt.Errorf("revoke grant %s's tokens: %w", id, err)
	}
	var ids []string
	for rows.Next() {
		var tid string
		if err := rows.Scan(&tid); err != nil {
			rows.Close()
			return nil, fmt.Errorf("revoke grant %s's tokens: %w", id, err)
		}
		ids = append(ids, tid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("revoke grant %s's tokens: %w", id, err)
	}
	for _, tid := range ids {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE tokens SET revoked_at = ? WHERE id = ?`), at.UnixMilli(), tid); err != nil {
			return nil, fmt.Errorf("revoke token %s: %w", tid, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE oauth_refresh_tokens SET used_at = ? WHERE grant_id = ? AND used_at IS NULL`), at.UnixMilli(), id); err != nil {
		return nil, fmt.Errorf("revoke grant %s's refresh tokens: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return ids, nil
}

// UseOAuthCode implements store.Store.
func (s *DB) UseOAuthCode(ctx context.Context, hash string, at time.Time) (store.OAuthCode, error) {
	var (
		c       = store.OAuthCode{Hash: hash}
		expires int64
		used    sql.NullInt64
	)
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE oauth_codes SET used_at = ? WHERE hash = ? AND used_at IS NULL`), at.UnixMilli(), hash)
	if err != nil {
		return store.OAuthCode{}, fmt.Errorf("use code: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.OAuthCode{}, fmt.Errorf("use code: %w", err)
	}
	err = s.db.QueryRowContext(ctx, s.q(`SELECT grant_id, redirect_uri, code_challenge, expires_at, used_at FROM oauth_codes WHERE hash = ?`), hash).
		Scan(&c.GrantID, &c.RedirectURI, &c.CodeChallenge, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthCode{}, fmt.Errorf("code: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.OAuthCode{}, fmt.Errorf("read code: %w", err)
	}
	c.ExpiresAt, c.UsedAt = time.UnixMilli(expires), fromMillis(used)
	if n == 0 {
		return c, fmt.Errorf("code: %w", store.ErrUsed)
	}
	return c, nil
}

// AddOAuthToken implements store.Store.
func (s *DB) AddOAuthToken(ctx context.Context, grantID string, t store.Token, refresh *store.OAuthRefresh) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add token to grant %s: %w", grantID, err)
	}
	defer tx.Rollback()
	// Claiming the grant row first (a no-op update) orders this against RevokeOAuthGrant in
	// both databases: a token is never added to a grant revoked meanwhile.
	res, err := tx.ExecContext(ctx, s.q(`UPDATE oauth_grants SET revoked_at = NULL WHERE id = ? AND revoked_at IS NULL`), grantID)
	if err != nil {
		return fmt.Errorf("add token to grant %s: %w", grantID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("add token to grant %s: %w", grantID, err)
	} else if n == 0 {
		return fmt.Errorf("grant %s: %w", grantID, store.ErrNotFound)
	}
	t.Grant = grantID
	if err := s.insertToken(ctx, tx, t); err != nil {
		return err
	}
	if refresh != nil {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO oauth_refresh_tokens (hash, grant_id, expires_at) VALUES (?, ?, ?)`),
			refresh.Hash, grantID, refresh.ExpiresAt.UnixMilli()); err != nil {
			return fmt.Errorf("add refresh token to grant %s: %w", grantID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add token to grant %s: %w", grantID, err)
	}
	return nil
}

// UseOAuthRefresh implements store.Store.
func (s *DB) UseOAuthRefresh(ctx context.Context, hash string, at time.Time) (store.OAuthRefresh, error) {
	var (
		r       = store.OAuthRefresh{Hash: hash}
		expires int64
		used    sql.NullInt64
	)
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE oauth_refresh_tokens SET used_at = ? WHERE hash = ? AND used_at IS NULL`), at.UnixMilli(), hash)
	if err != nil {
		return store.OAuthRefresh{}, fmt.Errorf("use refresh token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.OAuthRefresh{}, fmt.Errorf("use refresh token: %w", err)
	}
	err = s.db.QueryRowContext(ctx, s.q(`SELECT grant_id, expires_at, used_at FROM oauth_refresh_tokens WHERE hash = ?`), hash).Scan(&r.GrantID, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthRefresh{}, fmt.Errorf("refresh token: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.OAuthRefresh{}, fmt.Errorf("read refresh token: %w", err)
	}
	r.ExpiresAt, r.UsedAt = time.UnixMilli(expires), fromMillis(used)
	if n == 0 {
		return r, fmt.Errorf("refresh token: %w", store.ErrUsed)
	}
	return r, nil
}

// OAuthRefreshGrant implements store.Store.
func (s *DB) OAuthRefreshGrant(ctx context.Context, hash string) (string, error) {
	return s.oneString(ctx, `SELECT grant_id FROM oauth_refresh_tokens WHERE hash = ?`, hash)
}

// OAuthTokenGrant implements store.Store.
func (s *DB) OAuthTokenGrant(ctx context.Context, tokenID string) (string, error) {
	return s.oneString(ctx, `SELECT grant_id FROM tokens WHERE id = ? AND grant_id <> ''`, tokenID)
}

// OAuthGrantRefreshable implements store.Store.
func (s *DB) OAuthGrantRefreshable(ctx context.Context, grantID string, at time.Time) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM oauth_refresh_tokens WHERE grant_id = ? AND used_at IS NULL AND expires_at > ?`),
		grantID, at.UnixMilli()).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("count refresh tokens of grant %s: %w", grantID, err)
	}
	return n > 0, nil
}

func (s *DB) oneString(ctx context.Context, query string, arg any) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, s.q(query), arg).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read grant id: %w", err)
	}
	return v, nil
}

// DeleteExpiredOAuth implements store.Store.
func (s *DB) DeleteExpiredOAuth(ctx context.Context, before time.Time) (int, error) {
	n := 0
	for _, table := range []string{"oauth_codes", "oauth_refresh_tokens"} {
		res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE expires_at < ?`), before.UnixMilli())
		if err != nil {
			return n, fmt.Errorf("delete expired %s: %w", table, err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("delete expired %s: %w", table, err)
		}
		n += int(m)
	}
	return n, nil
}
