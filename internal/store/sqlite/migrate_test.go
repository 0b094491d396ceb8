package sqlite_test

import (
	"context"
	"database/sql"
	"io/fs"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/migrations"
)

// TestMigrateSessionsPerOwner: a database made before 00005 (names unique across users) keeps
// its sessions and turns through the migration, which makes names unique per owner.
func TestMigrateSessionsPerOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	migrateTo(t, ctx, dir, 4,
		`INSERT INTO sessions (id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at) VALUES ('ses_a', 'fix-bug', 'ada', 'tok', 'box', 'command', '{"K":"v"}', '', 2, 1000)`,
		`INSERT INTO turns (id, session_id, prompt, state, process_pid, created_at) VALUES ('turn_a', 'ses_a', 'go', 'running', 42, 1000)`)

	s, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	defer s.Close()
	se, err := s.GetSession(ctx, "ada", "fix-bug")
	if err != nil || se.ID != "ses_a" || se.Env["K"] != "v" || se.LastSeq != 2 || se.Split {
		t.Errorf("the session after the migration = %+v, %v", se, err)
	}
	if tu, err := s.GetTurn(ctx, "turn_a"); err != nil || tu.ProcessPID != 42 || tu.ProcessStart != 0 || tu.CancelRequested {
		t.Errorf("the turn after the migration = %+v, %v", tu, err)
	}
	bob := store.Session{ID: "ses_b", Name: "fix-bug", Owner: "bob", TokenID: "tok", Sandbox: "box", Agent: "command", CreatedAt: se.CreatedAt}
	if err := s.CreateSession(ctx, bob); err != nil {
		t.Errorf("bob's fix-bug beside ada's: %v", err)
	}
}

// migrateTo makes a database in dir at migration version and runs the statements on it.
func migrateTo(t *testing.T, ctx context.Context, dir string, version int64, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.Join(dir, sqlite.FileName)}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys, _ := fs.Sub(migrations.SQLite, "sqlite")
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestMigrateTurnLaunching: a turn an older hangar left queued (before 00014, which records a
// launch before it begins) is taken as launching, since that hangar may have launched its
// harness unrecorded: a restart fails it rather than launch a second. Others are not.
func TestMigrateTurnLaunching(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	migrateTo(t, ctx, dir, 13,
		`INSERT INTO sessions (id, name, owner, token_id, sandbox, agent, created_at) VALUES ('ses_a', 'a', 'ada', 'tok', 'box', 'command', 1000)`,
		`INSERT INTO sessions (id, name, owner, token_id, sandbox, agent, created_at) VALUES ('ses_b', 'b', 'ada', 'tok', 'box', 'command', 1000)`,
		`INSERT INTO turns (id, session_id, prompt, state, created_at) VALUES ('turn_q', 'ses_a', 'go', 'queued', 1000)`,
		`INSERT INTO turns (id, session_id, prompt, state, process_pid, created_at) VALUES ('turn_r', 'ses_b', 'go', 'running', 42, 1000)`)
	s, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	defer s.Close()
	for id, want := range map[string]bool{"turn_q": true, "turn_r": false} {
		if tu, err := s.GetTurn(ctx, id); err != nil || tu.Launching != want {
			t.Errorf("turn %s after the migration = %+v, %v; want launching %v", id, tu, err, want)
		}
	}
}
