// Package sqlstore implements store.Store over database/sql for both of hangar's databases. The
// two differ only in what a Dialect says: how parameters are written and how a unique-key
// violation looks. Times are kept as Unix milliseconds so neither driver's time handling matters.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/hangar-dev/hangar/internal/store"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Goose is the migration dialect.
	Goose goose.Dialect
	// Numbered makes parameters $1, $2, ... (PostgreSQL) instead of ?.
	Numbered bool
	// IsUniqueViolation reports whether err is a unique or primary key violation.
	IsUniqueViolation func(error) bool
	// Locker, when set, is held while the migrations are applied, so that hangars started at
	// once on one empty database do not apply them twice. Nil: no lock.
	Locker lock.SessionLocker
}

// DB is a store.Store over a *sql.DB.
type DB struct {
	db *pool
	d  Dialect
}

var _ store.Store = (*DB)(nil)

// NewerSchemaError is Open's refusal of a database that a newer hangar migrated: this one
// does not know what its tables mean.
type NewerSchemaError struct {
	// At is the database's schema version; Knows is the newest this hangar has.
	At, Knows int64
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("the database's schema is at version %d, newer than this hangar knows (up to %d): "+
		"run the newer hangar that migrated it, or restore the database from a backup taken before that hangar first started", e.At, e.Knows)
}

// Open applies the embedded migrations in fsys (the .sql files at its root) to db, under
// d.Locker, and returns the store, its connections bounded as pool says. A database whose
// schema is newer than fsys's newest migration is refused (*NewerSchemaError). On error db is
// left to the caller to close.
func Open(ctx context.Context, db *sql.DB, d Dialect, fsys fs.FS, pool Pool) (*DB, error) {
	return OpenSplit(ctx, db, db, d, fsys, pool)
}

// OpenSplit is Open with the queries that only read going to readers, a second *sql.DB on
// the same database, whose connections Pool.MaxConns bounds; everything else goes to writer,
// which gets one connection. That is SQLite's shape: one writer at a time (in-process writers
// queue for the connection instead of polling the file's lock), readers beside it (WAL). On
// error both are left to the caller to close.
func OpenSplit(ctx context.Context, db, readers *sql.DB, d Dialect, fsys fs.FS, pool Pool) (*DB, error) {
	pl := newPool(db, readers, pool)
	var opts []goose.ProviderOption
	if d.Locker != nil {
		opts = append(opts, goose.WithSessionLocker(d.Locker))
	}
	p, err := goose.NewProvider(d.Goose, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	_, upErr := p.Up(ctx)
	// Up applies nothing to a newer schema (its versions are all there) unless it misses one
	// of ours, which it refuses; either way the versions say why.
	current, newest, err := p.GetVersions(ctx)
	switch {
	case err == nil && current > newest:
		return nil, &NewerSchemaError{At: current, Knows: newest}
	case upErr != nil:
		return nil, fmt.Errorf("apply migrations: %w", upErr)
	case err != nil:
		return nil, fmt.Errorf("read the schema's version: %w", err)
	}
	return &DB{db: pl, d: d}, nil
}

// q rewrites ? parameters for the dialect. Queries here never hold a literal '?'.
func (s *DB) q(query string) string {
	if !s.d.Numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Ping implements store.Store.
func (s *DB) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close implements store.Store.
func (s *DB) Close() error { return s.db.Close() }

// EnsureUser implements store.Store.
func (s *DB) EnsureUser(ctx context.Context, name string) (store.User, error) {
	now := s.db.clock.Now().UnixMilli()
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO users (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`), name, now); err != nil {
		return store.User{}, fmt.Errorf("insert user %s: %w", name, err)
	}
	var created int64
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT created_at FROM users WHERE name = ?`), name).Scan(&created); err != nil {
		return store.User{}, fmt.Errorf("read user %s: %w", name, err)
	}
	return store.User{Name: name, CreatedAt: time.UnixMilli(created)}, nil
}

const tokenColumns = `id, user_name, hash, hint, description, scopes, sandbox, created_by, created_at, expires_at, revoked_at, audience, grant_id`

// CreateToken implements store.Store.
func (s *DB) CreateToken(ctx context.Context, t store.Token) error {
	return s.insertToken(ctx, s.db, t)
}

// CreateTokenWithin implements store.Store.
func (s *DB) CreateTokenWithin(ctx context.Context, t store.Token, max int, at time.Time) error {
	return s.within(ctx, t.User, max, at, func(tx *sql.Tx) error { return s.insertToken(ctx, tx, t) })
}

// LiveTokens implements store.Store.
func (s *DB) LiveTokens(ctx context.Context, user string, at time.Time) (int, error) {
	return s.liveTokens(ctx, s.db, user, at)
}

// liveQuery counts a user's live tokens and grants (store.Store.LiveTokens); its parameters
// are the user and the time, twice, then the time twice more.
const liveQuery = `SELECT
	(SELECT COUNT(*) FROM tokens WHERE user_name = ? AND grant_id = '' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)) +
	(SELECT COUNT(*) FROM oauth_grants g WHERE g.user_name = ? AND g.revoked_at IS NULL AND (
		EXISTS (SELECT 1 FROM oauth_refresh_tokens r WHERE r.grant_id = g.id AND r.used_at IS NULL AND r.expires_at > ?) OR
		EXISTS (SELECT 1 FROM oauth_codes c WHERE c.grant_id = g.id AND c.used_at IS NULL AND c.expires_at > ?)))`

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *DB) liveTokens(ctx context.Context, q querier, user string, at time.Time) (int, error) {
	var n int
	ms := at.UnixMilli()
	if err := q.QueryRowContext(ctx, s.q(liveQuery), user, ms, user, ms, ms).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the live tokens of %s: %w", user, err)
	}
	return n, nil
}

// within runs insert in a transaction unless user holds max live tokens at at already
// (store.ErrLimit). Taking the user's row first (a no-op update) orders it against the same
// user's others in both databases, so two cannot both pass the bound.
func (s *DB) within(ctx context.Context, user string, max int, at time.Time, insert func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if max > 0 {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET name = name WHERE name = ?`), user); err != nil {
			return fmt.Errorf("lock user %s: %w", user, err)
		}
		n, err := s.liveTokens(ctx, tx, user, at)
		if err != nil {
			return err
		}
		if n >= max {
			return fmt.Errorf("user %s holds %d live tokens: %w", user, n, store.ErrLimit)
		}
	}
	if err := insert(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// insertToken inserts t through ex: the database, or a transaction.
func (s *DB) insertToken(ctx context.Context, ex execer, t store.Token) error {
	_, err := ex.ExecContext(ctx, s.q(`INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, t.User, t.Hash, t.Hint, t.Description, strings.Join(t.Scopes, ","), t.Sandbox, t.CreatedBy,
		t.CreatedAt.UnixMilli(), millis(t.ExpiresAt), millis(t.RevokedAt), t.Audience, t.Grant)
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("insert token %s: %w", t.ID, store.ErrConflict)
		}
		return fmt.Errorf("insert token %s: %w", t.ID, err)
	}
	return nil
}

// TokenByHash implements store.Store.
func (s *DB) TokenByHash(ctx context.Context, hash string) (store.Token, error) {
	return s.oneToken(ctx, `hash = ?`, hash)
}

// TokenByID implements store.Store.
func (s *DB) TokenByID(ctx context.Context, id string) (store.Token, error) {
	return s.oneToken(ctx, `id = ?`, id)
}

func (s *DB) oneToken(ctx context.Context, where string, arg any) (store.Token, error) {
	row := s.db.QueryRowContext(ctx, s.q(`SELECT `+tokenColumns+` FROM tokens WHERE `+where), arg)
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Token{}, store.ErrNotFound
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("read token: %w", err)
	}
	return t, nil
}

// ListTokens implements store.Store.
func (s *DB) ListTokens(ctx context.Context, user string) ([]store.Token, error) {
	query, args := `SELECT `+tokenColumns+` FROM tokens WHERE revoked_at IS NULL`, []any{}
	if user != "" {
		query += ` AND user_name = ?`
		args = append(args, user)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+` ORDER BY created_at, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements store.Store.
func (s *DB) RevokeToken(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), at.UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("revoke token %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountTokens implements store.Store.
func (s *DB) CountTokens(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tokens`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanToken(r scanner) (store.Token, error) {
	var (
		t                store.Token
		scopes           string
		created          int64
		expires, revoked sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.User, &t.Hash, &t.Hint, &t.Description, &scopes, &t.Sandbox, &t.CreatedBy, &created, &expires, &revoked, &t.Audience, &t.Grant); err != nil {
		return store.Token{}, err
	}
	if scopes != "" {
		t.Scopes = strings.Split(scopes, ",")
	}
	t.CreatedAt = time.UnixMilli(created)
	t.ExpiresAt = fromMillis(expires)
	t.RevokedAt = fromMillis(revoked)
	return t, nil
}

// millis maps the zero time to NULL.
func millis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromMillis(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64)
}
