package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func testOAuthClients(t *testing.T, ctx context.Context, s store.Store) {
	c := store.OAuthClient{ID: "hc_1", Name: "Claude", RedirectURIs: []string{"http://127.0.0.1:9/cb", "https://app.example/cb"}, CreatedAt: time.UnixMilli(time.Now().UnixMilli())}
	if err := s.CreateOAuthClient(ctx, c); err != nil {
		t.Fatalf("CreateOAuthClient: %v", err)
	}
	if err := s.CreateOAuthClient(ctx, c); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateOAuthClient twice: %v, want ErrConflict", err)
	}
	got, err := s.GetOAuthClient(ctx, "hc_1")
	if err != nil || got.Name != c.Name || !slices.Equal(got.RedirectURIs, c.RedirectURIs) || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("GetOAuthClient = %+v, %v; want %+v", got, err, c)
	}
	if _, err := s.GetOAuthClient(ctx, "hc_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetOAuthClient(unknown): %v, want ErrNotFound", err)
	}
}

// newGrant stores a grant of ada's with its code "code-<id>".
func newGrant(t *testing.T, ctx context.Context, s store.Store, id string) store.OAuthGrant {
	t.Helper()
	now := time.UnixMilli(time.Now().UnixMilli())
	g := store.OAuthGrant{ID: id, ClientID: "https://app.example/client.json", ClientName: "App", User: "ada",
		Scopes: []string{"mcp"}, Sandbox: "box", Resource: "https://hangar.example/mcp", ConsentToken: "tok_ada", CreatedAt: now}
	code := store.OAuthCode{Hash: "code-" + id, RedirectURI: "https://app.example/cb", CodeChallenge: "challenge", ExpiresAt: now.Add(time.Minute)}
	if err := s.CreateOAuthGrant(ctx, g, code); err != nil {
		t.Fatalf("CreateOAuthGrant: %v", err)
	}
	return g
}

func testOAuthCodes(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	g := newGrant(t, ctx, s, "gr_1")
	got, err := s.GetOAuthGrant(ctx, g.ID)
	if err != nil || got.User != "ada" || !slices.Equal(got.Scopes, g.Scopes) || got.Sandbox != "box" || got.Resource != g.Resource ||
		got.ConsentToken != g.ConsentToken || got.ClientName != "App" || !got.CreatedAt.Equal(g.CreatedAt) || !got.RevokedAt.IsZero() {
		t.Fatalf("GetOAuthGrant = %+v, %v; want %+v", got, err, g)
	}
	now := time.Now()
	c, err := s.UseOAuthCode(ctx, "code-gr_1", now)
	if err != nil || c.GrantID != g.ID || c.RedirectURI != "https://app.example/cb" || c.CodeChallenge != "challenge" {
		t.Fatalf("UseOAuthCode = %+v, %v", c, err)
	}
	if c, err := s.UseOAuthCode(ctx, "code-gr_1", now); !errors.Is(err, store.ErrUsed) || c.GrantID != g.ID {
		t.Fatalf("UseOAuthCode again = %+v, %v; want the code and ErrUsed", c, err)
	}
	if _, err := s.UseOAuthCode(ctx, "code-none", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UseOAuthCode(unknown): %v, want ErrNotFound", err)
	}
}

func testOAuthTokensAndRevocation(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	g := newGrant(t, ctx, s, "gr_1")
	other := newGrant(t, ctx, s, "gr_2")
	tok := newToken("tok_a1", "ada")
	tok.Audience = g.Resource
	exp := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	if err := s.AddOAuthToken(ctx, g.ID, tok, &store.OAuthRefresh{Hash: "rt-1", ExpiresAt: exp}); err != nil {
		t.Fatalf("AddOAuthToken: %v", err)
	}
	if err := s.AddOAuthToken(ctx, other.ID, newToken("tok_b1", "ada"), nil); err != nil {
		t.Fatalf("AddOAuthToken(other grant): %v", err)
	}
	if got, err := s.TokenByID(ctx, "tok_a1"); err != nil || got.Audience != g.Resource || got.Grant != g.ID {
		t.Fatalf("TokenByID = %+v, %v; want audience %s and grant %s", got, err, g.Resource, g.ID)
	}
	if id, err := s.OAuthRefreshGrant(ctx, "rt-1"); err != nil || id != g.ID {
		t.Fatalf("OAuthRefreshGrant = %q, %v; want %s", id, err, g.ID)
	}
	if id, err := s.OAuthTokenGrant(ctx, "tok_b1"); err != nil || id != other.ID {
		t.Fatalf("OAuthTokenGrant = %q, %v; want %s", id, err, other.ID)
	}
	if _, err := s.OAuthTokenGrant(ctx, "tok_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OAuthTokenGrant(not an OAuth token): %v, want ErrNotFound", err)
	}
	if _, err := s.OAuthRefreshGrant(ctx, "rt-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OAuthRefreshGrant(unknown): %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		grant string
		at    time.Time
		want  bool
	}{{g.ID, time.Now(), true}, {g.ID, exp, false}, {other.ID, time.Now(), false}} {
		if ok, err := s.OAuthGrantRefreshable(ctx, c.grant, c.at); err != nil || ok != c.want {
			t.Fatalf("OAuthGrantRefreshable(%s, %v) = %v, %v; want %v", c.grant, c.at, ok, err, c.want)
		}
	}
	r, err := s.UseOAuthRefresh(ctx, "rt-1", time.Now())
	if ok, err := s.OAuthGrantRefreshable(ctx, g.ID, time.Now()); err != nil || ok {
		t.Fatalf("OAuthGrantRefreshable after its refresh token was used = %v, %v; want false", ok, err)
	}
	if err != nil || r.GrantID != g.ID || !r.ExpiresAt.Equal(exp) {
		t.Fatalf("UseOAuthRefresh = %+v, %v", r, err)
	}
	if _, err := s.UseOAuthRefresh(ctx, "rt-1", time.Now()); !errors.Is(err, store.ErrUsed) {
		t.Fatalf("UseOAuthRefresh again: %v, want ErrUsed", err)
	}
	if err := s.AddOAuthToken(ctx, g.ID, newToken("tok_a2", "ada"), &store.OAuthRefresh{Hash: "rt-2", ExpiresAt: exp}); err != nil {
		t.Fatalf("AddOAuthToken (a refresh): %v", err)
	}
	if gs, err := s.ListOAuthGrants(ctx, "ada"); err != nil || len(gs) != 2 {
		t.Fatalf("ListOAuthGrants = %v, %v; want 2", gs, err)
	}
	ids, err := s.RevokeOAuthGrant(ctx, g.ID, time.Now())
	if err != nil || !slices.Equal(ids, []string{"tok_a1", "tok_a2"}) {
		t.Fatalf("RevokeOAuthGrant = %v, %v; want its two tokens", ids, err)
	}
	for _, id := range ids {
		if tk, err := s.TokenByID(ctx, id); err != nil || tk.RevokedAt.IsZero() {
			t.Errorf("token %s after its grant was revoked = %+v, %v; want revoked", id, tk, err)
		}
	}
	if tk, err := s.TokenByID(ctx, "tok_b1"); err != nil || !tk.RevokedAt.IsZero() {
		t.Errorf("another grant's token = %+v, %v; want not revoked", tk, err)
	}
	if _, err := s.UseOAuthRefresh(ctx, "rt-2", time.Now()); !errors.Is(err, store.ErrUsed) {
		t.Errorf("a revoked grant's refresh token: %v, want ErrUsed", err)
	}
	if _, err := s.RevokeOAuthGrant(ctx, g.ID, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeOAuthGrant twice: %v, want ErrNotFound", err)
	}
	if err := s.AddOAuthToken(ctx, g.ID, newToken("tok_a3", "ada"), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AddOAuthToken to a revoked grant: %v, want ErrNotFound", err)
	}
	if _, err := s.TokenByID(ctx, "tok_a3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the token refused for a revoked grant was stored: %v", err)
	}
	if gs, err := s.ListOAuthGrants(ctx, ""); err != nil || len(gs) != 1 || gs[0].ID != other.ID {
		t.Errorf("ListOAuthGrants after revoking one = %v, %v; want only %s", gs, err, other.ID)
	}
}

func testOAuthExpiry(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	g := newGrant(t, ctx, s, "gr_1") // its code expires in a minute
	now := time.UnixMilli(time.Now().UnixMilli())
	if err := s.AddOAuthToken(ctx, g.ID, newToken("tok_a1", "ada"), &store.OAuthRefresh{Hash: "rt-old", ExpiresAt: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOAuthToken(ctx, g.ID, newToken("tok_a2", "ada"), &store.OAuthRefresh{Hash: "rt-new", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteExpiredOAuth(ctx, now); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredOAuth(now) = %d, %v; want the one expired refresh token", n, err)
	}
	if _, err := s.OAuthRefreshGrant(ctx, "rt-old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired refresh token: %v, want ErrNotFound", err)
	}
	if n, err := s.DeleteExpiredOAuth(ctx, now.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredOAuth(in 2 minutes) = %d, %v; want the code", n, err)
	}
	if _, err := s.UseOAuthCode(ctx, "code-gr_1", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired code: %v, want ErrNotFound", err)
	}
	if id, err := s.OAuthRefreshGrant(ctx, "rt-new"); err != nil || id != g.ID {
		t.Errorf("the live refresh token = %q, %v", id, err)
	}
}
