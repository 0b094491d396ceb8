// Package storetest is the one test suite every store.Store implementation passes.
package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// testTimeout bounds each case's database calls.
const testTimeout = 30 * time.Second

// Run runs the suite, its cases in parallel. open returns a new, empty, migrated store, one per
// case (so it must be safe to call from parallel tests); Run closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	cases := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, s store.Store)
	}{
		{"Ping", testPing},
		{"EnsureUser", testEnsureUser},
		{"TokenRoundTrip", testTokenRoundTrip},
		{"TokenConflicts", testTokenConflicts},
		{"TokenNeedsUser", testTokenNeedsUser},
		{"ListTokens", testListTokens},
		{"RevokeToken", testRevokeToken},
		{"LiveTokens", testLiveTokens},
		{"LiveTokensConcurrent", testLiveTokensConcurrent},
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"SandboxNames", testSandboxNames},
		{"SandboxStaysDestroyed", testSandboxStaysDestroyed},
		{"SandboxEnd", testSandboxEnd},
		{"ProcessLifecycle", testProcessLifecycle},
		{"UserProcesses", testUserProcesses},
		{"Sessions", testSessions},
		{"TurnLifecycle", testTurnLifecycle},
		{"Jobs", testJobs},
		{"Events", testEvents},
		{"EventSeqConcurrent", testEventSeqConcurrent},
		{"Tickets", testTickets},
		{"TicketRedeemedOnce", testTicketRedeemedOnce},
		{"InboxDismissals", testInboxDismissals},
		{"OAuthClients", testOAuthClients},
		{"OAuthCodes", testOAuthCodes},
		{"OAuthTokensAndRevocation", testOAuthTokensAndRevocation},
		{"OAuthExpiry", testOAuthExpiry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			s := open(t)
			defer s.Close()
			c.fn(t, ctx, s)
		})
	}
}

func testPing(t *testing.T, ctx context.Context, s store.Store) {
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testEnsureUser(t *testing.T, ctx context.Context, s store.Store) {
	u1, err := s.EnsureUser(ctx, "ada")
	if err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	u2, err := s.EnsureUser(ctx, "ada")
	if err != nil {
		t.Fatalf("EnsureUser again: %v", err)
	}
	if u1.Name != "ada" || !u1.CreatedAt.Equal(u2.CreatedAt) {
		t.Fatalf("EnsureUser twice = %+v then %+v, want the same user", u1, u2)
	}
}

func newToken(id, user string) store.Token {
	return store.Token{
		ID: id, User: user, Hash: "hash-" + id, Hint: "hgr_" + id[:2], Description: "for " + id,
		Scopes: []string{"user", "mcp"}, CreatedAt: time.UnixMilli(time.Now().UnixMilli()),
	}
}

func mustUser(t *testing.T, ctx context.Context, s store.Store, name string) {
	t.Helper()
	if _, err := s.EnsureUser(ctx, name); err != nil {
		t.Fatalf("EnsureUser %s: %v", name, err)
	}
}

func testTokenRoundTrip(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	want := newToken("tok1", "ada")
	want.Sandbox = "api-refactor"
	want.CreatedBy = "tok0"
	want.ExpiresAt = want.CreatedAt.Add(time.Hour)
	if err := s.CreateToken(ctx, want); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	for name, get := range map[string]func() (store.Token, error){
		"TokenByHash": func() (store.Token, error) { return s.TokenByHash(ctx, want.Hash) },
		"TokenByID":   func() (store.Token, error) { return s.TokenByID(ctx, want.ID) },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !equalTokens(got, want) {
			t.Errorf("%s = %+v, want %+v", name, got, want)
		}
	}
	if _, err := s.TokenByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TokenByHash(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.TokenByID(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TokenByID(unknown) error = %v, want ErrNotFound", err)
	}
	if n, err := s.CountTokens(ctx); err != nil || n != 1 {
		t.Errorf("CountTokens = %d, %v; want 1", n, err)
	}
}

func equalTokens(a, b store.Token) bool {
	return a.ID == b.ID && a.User == b.User && a.Hash == b.Hash && a.Hint == b.Hint &&
		a.Description == b.Description && slices.Equal(a.Scopes, b.Scopes) && a.Sandbox == b.Sandbox &&
		a.CreatedBy == b.CreatedBy && a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		a.RevokedAt.Equal(b.RevokedAt)
}

func testTokenConflicts(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	if err := s.CreateToken(ctx, newToken("tok1", "ada")); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	sameID := newToken("tok1", "ada")
	sameID.Hash = "other"
	if err := s.CreateToken(ctx, sameID); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateToken(same id) error = %v, want ErrConflict", err)
	}
	sameHash := newToken("tok2", "ada")
	sameHash.Hash = "hash-tok1"
	if err := s.CreateToken(ctx, sameHash); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateToken(same hash) error = %v, want ErrConflict", err)
	}
}

func testTokenNeedsUser(t *testing.T, ctx context.Context, s store.Store) {
	if err := s.CreateToken(ctx, newToken("tok1", "nobody")); err == nil {
		t.Fatal("CreateToken for a user that does not exist succeeded")
	}
}

func testListTokens(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	mustUser(t, ctx, s, "bob")
	for _, tk := range []store.Token{newToken("a1", "ada"), newToken("b1", "bob"), newToken("a2", "ada")} {
		if err := s.CreateToken(ctx, tk); err != nil {
			t.Fatalf("CreateToken: %v", err)
		}
	}
	ids := func(user string) []string {
		t.Helper()
		ts, err := s.ListTokens(ctx, user)
		if err != nil {
			t.Fatalf("ListTokens(%q): %v", user, err)
		}
		var out []string
		for _, tk := range ts {
			out = append(out, tk.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids("ada"); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("ListTokens(ada) = %v, want [a1 a2]", got)
	}
	if got := ids(""); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Errorf("ListTokens(all) = %v, want [a1 a2 b1]", got)
	}
	if err := s.RevokeToken(ctx, "a1", time.Now()); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if got := ids("ada"); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("ListTokens(ada) after revoking a1 = %v, want [a2]", got)
	}
}

func testRevokeToken(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	tk := newToken("tok1", "ada")
	if err := s.CreateToken(ctx, tk); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	at := time.UnixMilli(time.Now().UnixMilli())
	if err := s.RevokeToken(ctx, tk.ID, at); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	got, err := s.TokenByHash(ctx, tk.Hash)
	if err != nil {
		t.Fatalf("TokenByHash after revoke: %v", err)
	}
	if !got.RevokedAt.Equal(at) {
		t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, at)
	}
	if err := s.RevokeToken(ctx, tk.ID, at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeToken twice error = %v, want ErrNotFound", err)
	}
	if err := s.RevokeToken(ctx, "nope", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeToken(unknown) error = %v, want ErrNotFound", err)
	}
}
