package auth_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable time source.
type clock struct {
	quartz.Clock // nil: only Now is asked of it
	t            time.Time
}

func (c *clock) Now(...string) time.Time { return c.t }

type fixture struct {
	a     *auth.Authenticator
	store store.Store
	clock *clock
	dir   string
	admin auth.Principal
}

func newFixture(t *testing.T, tokensFile string) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlitetest.Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a, err := auth.New(context.Background(), auth.Config{Store: s, TokensFile: tokensFile, Clock: c})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	secret, created, err := a.Bootstrap(context.Background())
	if err != nil || !created {
		t.Fatalf("Bootstrap = %v, %v", created, err)
	}
	admin, err := a.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("Authenticate(admin): %v", err)
	}
	return &fixture{a: a, store: s, clock: c, dir: dir, admin: admin}
}

// sandbox stores a sandbox of owner in the given state, as the sandbox package would.
func (f *fixture) sandbox(t *testing.T, name, owner, state string) {
	t.Helper()
	sb := store.Sandbox{Name: name, Owner: owner, Provider: "local", State: state, CreatedAt: f.clock.t, UpdatedAt: f.clock.t}
	if err := f.store.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatalf("store sandbox %s: %v", name, err)
	}
}

func (f *fixture) create(t *testing.T, by auth.Principal, req auth.NewToken) (auth.Created, auth.Principal) {
	t.Helper()
	c, err := f.a.CreateToken(context.Background(), by, req)
	if err != nil {
		t.Fatalf("CreateToken(%+v): %v", req, err)
	}
	p, err := f.a.Authenticate(context.Background(), c.Secret)
	if err != nil {
		t.Fatalf("Authenticate(new token): %v", err)
	}
	return c, p
}

func TestBootstrapOnlyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	if !f.admin.IsAdmin() || f.admin.User != auth.AdminUser {
		t.Fatalf("bootstrap principal = %+v, want the admin user with the admin scope", f.admin)
	}
	if _, created, err := f.a.Bootstrap(context.Background()); err != nil || created {
		t.Fatalf("second Bootstrap created = %v, %v; want false", created, err)
	}
}

// TestBootstrapNotBesideAStaticAdmin: a tokens file that names an admin is the operator's admin
// token; no first one is made beside it.
func TestBootstrapNotBesideAStaticAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(staticSecret+" ops admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(ctx, auth.Config{Store: s, TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if secret, created, err := a.Bootstrap(ctx); err != nil || created || secret != "" {
		t.Errorf("Bootstrap beside a static admin = %v, %v; want nothing made", created, err)
	}
	if n, err := s.CountTokens(ctx); err != nil || n != 0 {
		t.Errorf("the store holds %d tokens (%v), want none", n, err)
	}
}

func TestAuthenticateRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	expiring, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}, ExpiresAt: f.clock.t.Add(time.Hour)})
	revoked, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}})
	if _, err := f.a.RevokeToken(ctx, f.admin, revoked.Token.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	f.clock.t = f.clock.t.Add(time.Hour)
	for _, c := range []struct {
		name, secret string
		want         error
	}{
		{"missing", "", auth.ErrNoToken},
		{"unknown", "hgr_" + strings.Repeat("a", 52), auth.ErrUnknownToken},
		{"revoked", revoked.Secret, auth.ErrRevoked},
		{"expired", expiring.Secret, auth.ErrExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := f.a.Authenticate(ctx, c.secret); !errors.Is(err, c.want) {
				t.Fatalf("Authenticate error = %v, want %v", err, c.want)
			}
		})
	}
}

func TestTokenShape(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.sandbox(t, "api-refactor", "ada", "running")
	c, p := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "api-refactor"})
	if !strings.HasPrefix(c.Secret, auth.TokenPrefix) || len(c.Secret) < len(auth.TokenPrefix)+52 {
		t.Errorf("secret %q: want the %s prefix and 32 random bytes", c.Secret, auth.TokenPrefix)
	}
	if p.User != "ada" || p.Sandbox != "api-refactor" || !p.Has(auth.ScopeMCP) || p.Has(auth.ScopeJobs) || p.IsAdmin() {
		t.Errorf("principal = %+v", p)
	}
	other, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}})
	if other.Secret == c.Secret || other.Token.ID == c.Token.ID {
		t.Error("two tokens share a secret or an id")
	}
}

func TestSecretNowhereOnDisk(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}})
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, e := range entries { // hangar.db and its WAL files
		data, err := os.ReadFile(filepath.Join(f.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		read += len(data)
		if bytes.Contains(data, []byte(c.Secret)) || bytes.Contains(data, []byte(c.Secret[len(auth.TokenPrefix)+4:])) {
			t.Errorf("the token's secret is in %s", e.Name())
		}
	}
	if read == 0 {
		t.Fatal("read no database files: the check above proved nothing")
	}
}

func TestCreateTokenRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	f.sandbox(t, "box", "ada", "running")
	f.sandbox(t, "bobs", "bob", "running")
	f.sandbox(t, "gone", "ada", "destroyed")
	_, user := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, ExpiresAt: f.clock.t.Add(48 * time.Hour)})
	_, bound := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "box"})
	_, mcpOnly := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}})
	cases := []struct {
		name string
		by   auth.Principal
		req  auth.NewToken
		want error
	}{
		{"user narrower", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}}, nil},
		{"user wider", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeJobs}}, auth.ErrForbidden},
		{"user admin", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeAdmin}}, auth.ErrForbidden},
		{"user for another", user, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeMCP}}, auth.ErrForbidden},
		{"user outliving", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, ExpiresAt: f.clock.t.Add(72 * time.Hour)}, auth.ErrForbidden},
		{"bound other sandbox", bound, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "other"}, auth.ErrForbidden},
		{"mcp only", mcpOnly, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}}, auth.ErrForbidden},
		{"no scopes", f.admin, auth.NewToken{User: "bob"}, auth.ErrInvalid},
		{"unknown scope", f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{"root"}}, auth.ErrInvalid},
		{"bad sandbox", f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeUser}, Sandbox: "Not_A_Label"}, auth.ErrInvalid},
		{"bad user", f.admin, auth.NewToken{User: "bob smith", Scopes: []auth.Scope{auth.ScopeUser}}, auth.ErrInvalid},
		{"past expiry", f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeUser}, ExpiresAt: f.clock.t.Add(-time.Second)}, auth.ErrInvalid},
		{"admin for another", f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeJobs}}, nil},
		// A user binds only to an existing sandbox of their own: another's (the takeover the
		// isolation matrix found), a name nobody has yet, a destroyed one are one answer.
		{"user binds own sandbox", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "box"}, nil},
		{"user binds another's sandbox", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "bobs"}, auth.ErrNoSandbox},
		{"user binds a missing sandbox", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "later"}, auth.ErrNoSandbox},
		{"user binds a destroyed sandbox", user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "gone"}, auth.ErrNoSandbox},
		{"admin binds a missing sandbox", f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "later"}, auth.ErrNoSandbox},
		{"admin binds for a non-owner", f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "bobs"}, auth.ErrInvalid},
		{"admin scope bound", f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeAdmin}, Sandbox: "box"}, auth.ErrInvalid},
		{"a description too long", f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}, Description: strings.Repeat("d", auth.MaxDescription+1)}, auth.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.a.CreateToken(ctx, c.by, c.req)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("CreateToken error = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("admin binding makes the owner's token", func(t *testing.T) {
		_, p := f.create(t, f.admin, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "bobs"})
		if p.User != "bob" || p.Sandbox != "bobs" {
			t.Errorf("admin's token bound to bob's sandbox = user %q sandbox %q, want bob's bound to bobs", p.User, p.Sandbox)
		}
	})
	t.Run("inherits binding and expiry", func(t *testing.T) {
		_, p := f.create(t, bound, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}})
		if p.Sandbox != "box" {
			t.Errorf("token made by a bound token has sandbox %q, want box", p.Sandbox)
		}
		_, p = f.create(t, user, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}})
		if !p.ExpiresAt.Equal(user.ExpiresAt) {
			t.Errorf("token made by an expiring token expires %v, want %v", p.ExpiresAt, user.ExpiresAt)
		}
	})
}

func TestListAndRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	adaTok, ada := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}})
	bobTok, bob := f.create(t, f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeUser}})
	ids := func(by auth.Principal) map[string]bool {
		ts, err := f.a.ListTokens(ctx, by)
		if err != nil {
			t.Fatalf("ListTokens: %v", err)
		}
		m := map[string]bool{}
		for _, ti := range ts {
			m[ti.ID] = true
			if strings.Contains(ti.Hint, adaTok.Secret) || len(ti.Hint) > len(auth.TokenPrefix)+8 {
				t.Errorf("listed hint %q is too much of the secret", ti.Hint)
			}
		}
		return m
	}
	if got := ids(ada); !got[adaTok.Token.ID] || got[bobTok.Token.ID] || len(got) != 1 {
		t.Errorf("ada lists %v, want only her own token", got)
	}
	if got := ids(f.admin); !got[adaTok.Token.ID] || !got[bobTok.Token.ID] || !got[f.admin.TokenID] {
		t.Errorf("admin lists %v, want every token", got)
	}
	if _, err := f.a.RevokeToken(ctx, ada, bobTok.Token.ID); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("ada revoking bob's token: %v, want ErrNotFound", err)
	}
	if err := f.a.Check(ctx, bob); err != nil {
		t.Errorf("Check(bob) before revoking = %v", err)
	}
	if _, err := f.a.RevokeToken(ctx, bob, bobTok.Token.ID); err != nil {
		t.Fatalf("bob revoking his own token: %v", err)
	}
	if err := f.a.Check(ctx, bob); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Check(bob) after revoking = %v, want ErrRevoked", err)
	}
	if _, err := f.a.Authenticate(ctx, bobTok.Secret); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Authenticate(bob) after revoking = %v, want ErrRevoked", err)
	}
	if _, err := f.a.RevokeToken(ctx, f.admin, bobTok.Token.ID); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoking twice: %v, want ErrNotFound", err)
	}
}

func TestCheckExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	_, p := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}, ExpiresAt: f.clock.t.Add(time.Minute)})
	if err := f.a.Check(context.Background(), p); err != nil {
		t.Fatalf("Check = %v", err)
	}
	f.clock.t = f.clock.t.Add(time.Minute)
	if err := f.a.Check(context.Background(), p); !errors.Is(err, auth.ErrExpired) {
		t.Fatalf("Check after expiry = %v, want ErrExpired", err)
	}
}

const staticSecret = "static-secret-0123456789abcdef0123456789"

func TestStaticTokens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# ci token\n" + staticSecret + " ci user,mcp box\n")
	f := newFixture(t, path)
	ctx := context.Background()
	p, err := f.a.Authenticate(ctx, staticSecret)
	if err != nil {
		t.Fatalf("Authenticate(static): %v", err)
	}
	if !p.Static || p.User != "ci" || p.Sandbox != "box" || !p.Has(auth.ScopeMCP) {
		t.Fatalf("static principal = %+v", p)
	}
	if _, err := f.a.RevokeToken(ctx, f.admin, p.TokenID); !errors.Is(err, auth.ErrStatic) {
		t.Errorf("revoking a static token = %v, want ErrStatic", err)
	}
	// Removing its line revokes it once the file is reread (at most a second later).
	write("# nothing\n")
	f.clock.t = f.clock.t.Add(2 * time.Second)
	if err := os.Chtimes(path, f.clock.t, f.clock.t); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Check(ctx, p); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Check after removing the line = %v, want ErrRevoked", err)
	}
	if _, err := f.a.Authenticate(ctx, staticSecret); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("Authenticate after removing the line = %v, want ErrUnknownToken", err)
	}
}

func TestStaticTokensFileErrors(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"short token":   "short ci user\n",
		"unknown scope": staticSecret + " ci root\n",
		"few fields":    staticSecret + " ci\n",
		"bad sandbox":   staticSecret + " ci user Bad_Box\n",
		"duplicate":     staticSecret + " ci user\n" + staticSecret + " ci mcp\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			os.WriteFile(path, []byte(content), 0o600)
			s, err := sqlitetest.Open(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := auth.New(context.Background(), auth.Config{Store: s, TokensFile: path}); err == nil || !strings.Contains(err.Error(), "line") {
				t.Fatalf("auth.New = %v, want an error naming the line", err)
			}
		})
	}
}

// TestNarrowTokensSeeLittle: an agent's token (bound to a sandbox) sees and revokes only its
// user's tokens bound to the same sandbox; mcp- or jobs-only tokens manage no tokens at all.
func TestNarrowTokensSeeLittle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	f.sandbox(t, "box", "ada", "running")
	f.sandbox(t, "other", "ada", "running")
	person, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}})
	_, agent := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "box"})
	sibling, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "box"})
	other, _ := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "other"})
	_, mcpOnly := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}})
	ts, err := f.a.ListTokens(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range ts {
		if ti.Sandbox != "box" {
			t.Errorf("the agent's token lists %s (sandbox %q)", ti.ID, ti.Sandbox)
		}
	}
	if len(ts) != 2 {
		t.Errorf("the agent's token lists %d tokens, want its own and its sibling", len(ts))
	}
	for _, id := range []string{person.Token.ID, other.Token.ID} {
		if _, err := f.a.RevokeToken(ctx, agent, id); !errors.Is(err, auth.ErrNotFound) {
			t.Errorf("the agent revoking %s: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := f.a.RevokeToken(ctx, agent, sibling.Token.ID); err != nil {
		t.Errorf("the agent revoking a token of its own sandbox: %v", err)
	}
	if _, err := f.a.ListTokens(ctx, mcpOnly); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("an mcp-only token listing tokens: %v, want ErrForbidden", err)
	}
	if _, err := f.a.RevokeToken(ctx, mcpOnly, person.Token.ID); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("an mcp-only token revoking: %v, want ErrForbidden", err)
	}
}

// TestRevokingABoundTokenRevokesWhatItMade: an agent's token may make tokens for its own
// sandbox; revoking it revokes those and theirs (the copies an agent made of itself), and
// returns their ids so their streams end now. A token the agent did not make stands, and so do
// the tokens an unbound token made: they are its person's own.
func TestRevokingABoundTokenRevokesWhatItMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	f.sandbox(t, "box", "ada", "running")
	person, adaP := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}})
	agent, agentP := f.create(t, adaP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, Sandbox: "box"})
	copy1, copyP := f.create(t, agentP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}})
	copy2, copy2P := f.create(t, copyP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}})
	_, siblingP := f.create(t, adaP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: "box"})
	_, personalP := f.create(t, adaP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}})

	ended, err := f.a.RevokeToken(ctx, adaP, agent.Token.ID)
	if err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if !slices.Contains(ended, copy1.Token.ID) || !slices.Contains(ended, copy2.Token.ID) || len(ended) != 2 {
		t.Errorf("ended %v, want the agent's copy %s and the copy's %s", ended, copy1.Token.ID, copy2.Token.ID)
	}
	for _, p := range []auth.Principal{agentP, copyP, copy2P} {
		if err := f.a.Check(ctx, p); !errors.Is(err, auth.ErrRevoked) {
			t.Errorf("Check(%s) = %v, want ErrRevoked", p.TokenID, err)
		}
	}
	for _, p := range []auth.Principal{adaP, siblingP, personalP} {
		if err := f.a.Check(ctx, p); err != nil {
			t.Errorf("Check(%s) = %v: a token the agent did not make was revoked", p.TokenID, err)
		}
	}
	// A request of the agent's that was under way as it was revoked, making a token after the
	// revocation listed what the agent made: that token does not stand either.
	late, err := f.a.CreateToken(ctx, agentP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeMCP}})
	if !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("CreateToken by a token revoked meanwhile = %v, want ErrRevoked", err)
	}
	if late.Secret != "" {
		t.Error("CreateToken by a token revoked meanwhile gave a secret")
	}
	if ts, _ := f.a.ListTokens(ctx, adaP); len(ts) != 3 { // ada's own, her sibling and personal tokens
		t.Errorf("ada's tokens after the late one = %d, want 3: %+v", len(ts), ts)
	}
	// An unbound token's tokens are its person's: revoking it leaves them.
	if _, err := f.a.RevokeToken(ctx, f.admin, person.Token.ID); err != nil {
		t.Fatalf("RevokeToken(person): %v", err)
	}
	for _, p := range []auth.Principal{siblingP, personalP} {
		if err := f.a.Check(ctx, p); err != nil {
			t.Errorf("Check(%s) after its maker was revoked = %v", p.TokenID, err)
		}
	}
}

// TestPageToken: the Fleet page's token is its maker's person with the user scope only, lives
// at most PageTokenTTL and never past its maker, and stands only while its maker does: revoked
// with it through the API, refused once it is revoked past the API or has expired.
func TestPageToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	if _, err := f.a.PageToken(ctx, "tok_nope"); !errors.Is(err, auth.ErrUnknownToken) {
		t.Errorf("PageToken of no token = %v, want ErrUnknownToken", err)
	}
	_, mcpOnly := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}})
	if _, err := f.a.PageToken(ctx, mcpOnly.TokenID); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("PageToken of an mcp token = %v, want ErrForbidden", err)
	}
	adaExpiry := f.clock.t.Add(2 * time.Hour)
	_, ada := f.create(t, f.admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser, auth.ScopeMCP}, ExpiresAt: adaExpiry})
	page, err := f.a.PageToken(ctx, ada.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	if page.Token.User != "ada" || !slices.Equal(page.Token.Scopes, []auth.Scope{auth.ScopeUser}) || !page.Token.ExpiresAt.Equal(adaExpiry) {
		t.Errorf("ada's page token %+v; want ada's, user scope only, expiring with her token at %s", page.Token, adaExpiry)
	}
	admins, err := f.a.PageToken(ctx, f.admin.TokenID)
	if err != nil || slices.Contains(admins.Token.Scopes, auth.ScopeAdmin) || !admins.Token.ExpiresAt.Equal(f.clock.t.Add(auth.PageTokenTTL).Truncate(time.Millisecond)) {
		t.Errorf("the admin's page token %+v, %v; want the user scope only, for PageTokenTTL", admins.Token, err)
	}
	pageP, err := f.a.Authenticate(ctx, page.Secret)
	if err != nil {
		t.Fatal(err)
	}
	// A page's token makes no token, and signs no page in: either would outlive the revocation
	// of the token that signed it in. Its description is hangar's alone.
	if !pageP.Page {
		t.Error("the page's principal does not say it is a page's")
	}
	if _, err := f.a.CreateToken(ctx, pageP, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}}); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("CreateToken by a page's token = %v, want ErrForbidden", err)
	}
	if _, err := f.a.PageToken(ctx, pageP.TokenID); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("PageToken of a page's token = %v, want ErrForbidden", err)
	}
	if _, err := f.a.CreateToken(ctx, ada, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}, Description: page.Token.Description}); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("CreateToken with the page's description = %v, want ErrInvalid", err)
	}
	// Revoked past the API (no cascade): the page's token is refused all the same.
	if err := f.store.RevokeToken(ctx, ada.TokenID, f.clock.t); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Authenticate(ctx, page.Secret); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Authenticate(page) once its maker is revoked = %v, want ErrRevoked", err)
	}
	if err := f.a.Check(ctx, pageP); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("Check(page) once its maker is revoked = %v, want ErrRevoked", err)
	}
	// Through the API: revoked with its maker, and said so (its streams end at once).
	_, bob := f.create(t, f.admin, auth.NewToken{User: "bob", Scopes: []auth.Scope{auth.ScopeUser}})
	bobsPage, err := f.a.PageToken(ctx, bob.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	_, bobsOwn := f.create(t, bob, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}})
	ended, err := f.a.RevokeToken(ctx, bob, bob.TokenID)
	if err != nil || !slices.Equal(ended, []string{bobsPage.Token.ID}) {
		t.Errorf("revoking bob's token ended %v, %v; want his page's %s only", ended, err, bobsPage.Token.ID)
	}
	if err := f.a.Check(ctx, bobsOwn); err != nil {
		t.Errorf("a token bob made for himself, after his maker was revoked: %v", err)
	}
}

// TestBoundIsNeverAdmin: a bound principal is confined to its sandbox whatever its scopes (a
// tokens-file line may give one the admin scope; the API refuses to).
func TestBoundIsNeverAdmin(t *testing.T) {
	t.Parallel()
	p := auth.Principal{User: "ada", Scopes: []auth.Scope{auth.ScopeAdmin}, Sandbox: "box"}
	if p.IsAdmin() {
		t.Error("a principal bound to a sandbox acts as an admin")
	}
	if !p.Has(auth.ScopeUser) {
		t.Error("the admin scope no longer implies the user scope")
	}
	// It acts as a bound token of the user scope (docs/security.md), not one of every scope.
	for _, s := range []auth.Scope{auth.ScopeMCP, auth.ScopeJobs} {
		if p.Has(s) {
			t.Errorf("a bound principal with the admin scope has the %s scope", s)
		}
	}
	if unbound := (auth.Principal{User: "root", Scopes: []auth.Scope{auth.ScopeAdmin}}); !unbound.Has(auth.ScopeMCP) || !unbound.Has(auth.ScopeJobs) {
		t.Error("an admin lacks a scope")
	}
}

// TestAtMCP: at /mcp a token with mcp and jobs acts as an mcp token (scopes add up); one without
// jobs, or without mcp, is left as it is.
func TestAtMCP(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want []auth.Scope }{
		{[]auth.Scope{auth.ScopeMCP, auth.ScopeJobs}, []auth.Scope{auth.ScopeMCP}},
		{[]auth.Scope{auth.ScopeJobs, auth.ScopeUser, auth.ScopeMCP}, []auth.Scope{auth.ScopeUser, auth.ScopeMCP}},
		{[]auth.Scope{auth.ScopeMCP}, []auth.Scope{auth.ScopeMCP}},
		{[]auth.Scope{auth.ScopeJobs}, []auth.Scope{auth.ScopeJobs}},
	} {
		p := auth.Principal{TokenID: "tok_1", User: "ada", Scopes: c.in}
		if got := p.AtMCP(); !slices.Equal(got.Scopes, c.want) || got.TokenID != "tok_1" {
			t.Errorf("AtMCP(%v) = %+v, want scopes %v", c.in, got, c.want)
		}
		if len(p.Scopes) != len(c.in) {
			t.Errorf("AtMCP changed its principal's scopes: %v", p.Scopes)
		}
	}
}

// TestTokensPerUser: a user holding MaxPerUser live tokens gets no more (a *TokenLimitError
// that names the bound and how to free room), whoever makes them, an admin included; expired
// and revoked tokens do not count, and revoking one makes room; another user is not held back.
func TestTokensPerUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	a, err := auth.New(ctx, auth.Config{Store: s, Clock: c, MaxPerUser: 3})
	if err != nil {
		t.Fatal(err)
	}
	admin := auth.Principal{User: "admin", Scopes: []auth.Scope{auth.ScopeAdmin}}
	first, err := a.CreateToken(ctx, admin, auth.NewToken{User: "mallory", Scopes: []auth.Scope{auth.ScopeUser}})
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := a.Authenticate(ctx, first.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateToken(ctx, mallory, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}, ExpiresAt: c.t.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	third, err := a.CreateToken(ctx, mallory, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}})
	if err != nil {
		t.Fatal(err)
	}
	var le *auth.TokenLimitError
	for _, by := range []auth.Principal{mallory, admin} {
		_, err := a.CreateToken(ctx, by, auth.NewToken{User: "mallory", Scopes: []auth.Scope{auth.ScopeUser}})
		if !errors.As(err, &le) || le.Max != 3 || le.User != "mallory" {
			t.Fatalf("a 4th live token of mallory's, made by %s: %v, want a TokenLimitError", by.User, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "HANGAR_TOKENS_MAX_PER_USER") || !strings.Contains(msg, "revoke") {
			t.Errorf("the refusal does not name the setting or how to make room: %q", msg)
		}
	}
	if _, err := a.CreateToken(ctx, admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}); err != nil {
		t.Errorf("ada's token, with mallory at her bound: %v", err)
	}
	c.t = c.t.Add(time.Minute) // the second has expired
	if _, err := a.CreateToken(ctx, mallory, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}}); err != nil {
		t.Fatalf("a token once one expired: %v", err)
	}
	if _, err := a.RevokeToken(ctx, mallory, third.Token.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateToken(ctx, mallory, auth.NewToken{Scopes: []auth.Scope{auth.ScopeUser}}); err != nil {
		t.Fatalf("a token once one was revoked: %v", err)
	}
}
