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
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.Join(dir, sqlite.FileName)}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	fsys, _ := fs.Sub(migrations.SQLite, "sqlite")
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sessions (id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at) VALUES ('ses_a', 'fix-bug', 'ada', 'tok', 'box', 'command', '{"K":"v"}', '', 2, 1000)`,
		`INSERT INTO turns (id, session_id, prompt, state, process_pid, created_at) VALUES ('turn_a', 'ses_a', 'go', 'running', 42, 1000)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

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
