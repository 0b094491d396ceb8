package turns

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/seal"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// envSecret is the control plane's secret of these tests, and otherSecret another hangar's.
var envSecret, otherSecret = []byte(strings.Repeat("k", 64)), []byte(strings.Repeat("o", 64))

func envBox(t *testing.T, secret []byte) *seal.Box {
	t.Helper()
	b, err := seal.New(secret, EnvPurpose)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// printEnvHash is a turn's command that records the SHA-256 of $SECRET_KEY as an event: the
// value itself would land in the store as an event, the prompt or a command line.
const printEnvHash = `printf '{"type":"env","sha256":"%s"}\n' "$(printf %s "$SECRET_KEY" | sha256sum | cut -d' ' -f1)"`

// envHashSeen returns the hash the turn's env event carries.
func envHashSeen(t *testing.T, ctx context.Context, st store.Store, sessionID string) string {
	t.Helper()
	evs, err := st.ListEvents(ctx, sessionID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var v struct{ Type, SHA256 string }
		if json.Unmarshal(e.Data, &v) == nil && v.Type == "env" {
			return v.SHA256
		}
	}
	return ""
}

// useStore makes st the fixture's store, with its sandbox "box".
func (f *fixture) useStore(t *testing.T, st store.Store) {
	t.Helper()
	now := f.clock.Now() // as old as the Service's clock says (newFixture)
	if err := st.CreateSandbox(context.Background(), store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	ns := notifying(st)
	f.st, f.sbs.st, f.cfg.Store = ns, ns, ns
}

// TestEnvSealedAtRest: a session's env value is nowhere in the database's bytes (SQLite's
// files with their write-ahead log; PostgreSQL's rows as text), and its turn's agent sees it
// all the same.
func TestEnvSealedAtRest(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var raw func() []byte
			f := newFixture(t)
			switch db {
			case "sqlite":
				dir := t.TempDir()
				st, err := sqlitetest.Open(ctx, dir)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				f.useStore(t, st)
				raw = func() []byte {
					var all []byte
					for _, name := range []string{"hangar.db", "hangar.db-wal"} {
						b, _ := os.ReadFile(filepath.Join(dir, name))
						all = append(all, b...)
					}
					return all
				}
			case "postgres":
				url := storetest.FreshSchema(t, storetest.PostgresURL(t))
				st, err := postgres.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				f.useStore(t, st)
				raw = func() []byte {
					sdb, err := sql.Open("pgx", url)
					if err != nil {
						t.Fatal(err)
					}
					defer sdb.Close()
					var all []byte
					for _, q := range []string{`SELECT s::text FROM sessions s`, `SELECT t::text FROM turns t`, `SELECT e::text FROM events e`} {
						rows, err := sdb.QueryContext(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						for rows.Next() {
							var row string
							rows.Scan(&row)
							all = append(all, row...)
						}
						rows.Close()
					}
					return all
				}
			}
			f.cfg.EnvSeal = envBox(t, envSecret)
			s := f.service(t)
			value := "sk-live-" + rand.Text()
			se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command", Env: map[string]string{"SECRET_KEY": value}})
			if err != nil {
				t.Fatal(err)
			}
			if len(se.EnvKeys) != 1 || se.EnvKeys[0] != "SECRET_KEY" {
				t.Errorf("session env keys = %v, want [SECRET_KEY]", se.EnvKeys)
			}
			tu, err := s.StartTurn(ctx, ada, "s1", printEnvHash)
			if err != nil {
				t.Fatal(err)
			}
			if end := waitTurn(t, ctx, f.st, tu.ID); end.State != store.TurnDone {
				t.Fatalf("turn = %s (%s), want done", end.State, end.Reason)
			}
			want := sha256.Sum256([]byte(value))
			if got := envHashSeen(t, ctx, f.st, se.ID); got != hex.EncodeToString(want[:]) {
				t.Errorf("the agent saw an env whose hash is %q, want the session's value's", got)
			}
			b := raw()
			if len(b) == 0 {
				t.Fatal("read nothing of the database")
			}
			if bytes.Contains(b, []byte(value)) {
				t.Errorf("the env value is in the %s database in the clear", db)
			}
			if !bytes.Contains(b, []byte("SECRET_KEY")) {
				t.Errorf("the env name is not in the %s database: the raw read missed the sessions", db)
			}
		})
	}
}

// TestEnvWrongKey: a hangar with another secret does not hand the agent a sealed string as its
// env: the turn fails before the harness starts, with a reason that names the key.
func TestEnvWrongKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	f.cfg.EnvSeal = envBox(t, envSecret)
	s := f.service(t)
	if _, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command", Env: map[string]string{"SECRET_KEY": "sk-1"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// No clock driver: the turn ends before anything polls.
	f.cfg.EnvSeal = envBox(t, otherSecret)
	other := New(f.cfg)
	t.Cleanup(other.Close)
	tu, err := other.StartTurn(ctx, ada, "s1", printEnvHash)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnFailed || !strings.Contains(end.Reason, "does not open with this hangar's key") || !strings.Contains(end.Reason, "HANGAR_SECRET") {
		t.Errorf("turn = %s, reason %q; want failed, saying the env does not open with this key", end.State, end.Reason)
	}
	f.sbs.mu.Lock()
	defer f.sbs.mu.Unlock()
	for _, c := range f.sbs.cmds {
		if strings.Contains(c, " harness ") {
			t.Errorf("the harness was started: %.200s", c)
		}
	}
}

// TestEnvStoredInTheClearSealedAtStart: env an older hangar kept in the clear still reaches the
// agent, and SealStoredEnv seals it in the store.
func TestEnvStoredInTheClearSealedAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	if err := f.st.CreateSession(ctx, store.Session{ID: "ses_old", Name: "old", Owner: "ada", TokenID: "tok", Sandbox: "box", Agent: "command",
		Env: map[string]string{"SECRET_KEY": "sk-old"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f.cfg.EnvSeal = envBox(t, envSecret)
	s := f.service(t)
	if n, err := s.SealStoredEnv(ctx); err != nil || n != 1 {
		t.Fatalf("SealStoredEnv = %d, %v; want 1 session", n, err)
	}
	se, err := f.st.GetSession(ctx, "", "ses_old")
	if err != nil {
		t.Fatal(err)
	}
	if v := se.Env["SECRET_KEY"]; !seal.Sealed(v) || strings.Contains(v, "sk-old") {
		t.Errorf("stored env = %q, want it sealed", v)
	}
	if n, err := s.SealStoredEnv(ctx); err != nil || n != 0 {
		t.Errorf("SealStoredEnv again = %d, %v; want nothing to do", n, err)
	}
	tu, err := s.StartTurn(ctx, ada, "old", printEnvHash)
	if err != nil {
		t.Fatal(err)
	}
	if end := waitTurn(t, ctx, f.st, tu.ID); end.State != store.TurnDone {
		t.Fatalf("turn = %s (%s), want done", end.State, end.Reason)
	}
	want := sha256.Sum256([]byte("sk-old"))
	if got := envHashSeen(t, ctx, f.st, "ses_old"); got != hex.EncodeToString(want[:]) {
		t.Errorf("the agent saw an env whose hash is %q, want sk-old's", got)
	}
}
