package mcp

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

// TestVerifier: a token with the mcp scope passes and carries its principal; one without it
// has no mcp in its scopes (a 403 insufficient_scope from the SDK's middleware); an unknown
// one and one issued for another resource are ErrInvalidToken (a 401).
func TestVerifier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := auth.New(ctx, auth.Config{Store: s})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	secret, _, err := a.Bootstrap(ctx)
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	admin, err := a.Authenticate(ctx, secret)
	if err != nil {
		t.Fatalf("Authenticate(admin): %v", err)
	}
	create := func(scope auth.Scope) string {
		c, err := a.CreateToken(ctx, admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{scope}})
		if err != nil {
			t.Fatalf("CreateToken(%s): %v", scope, err)
		}
		return c.Secret
	}
	withMCP, withoutMCP := create(auth.ScopeMCP), create(auth.ScopeJobs)
	const resource = "https://hangar.example/mcp"
	forUs, err := a.CreateToken(ctx, admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Audience: resource})
	if err != nil {
		t.Fatal(err)
	}
	forOther, err := a.CreateToken(ctx, admin, auth.NewToken{User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}, Audience: "https://other.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	verify := verifier(a, resource, &sync.Map{})
	for _, secret := range []string{withMCP, forUs.Secret, secret} {
		info, err := verify(ctx, secret, nil)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if p, ok := principalFromTokenInfo(info); !ok || info.UserID != p.TokenID || !slices.Equal(info.Scopes, []string{"mcp"}) {
			t.Errorf("principal from token info = %+v, %v (UserID %q, scopes %v)", p, ok, info.UserID, info.Scopes)
		}
	}
	if info, err := verify(ctx, withoutMCP, nil); err != nil || len(info.Scopes) != 0 {
		t.Errorf("verify(no mcp scope) = %+v, %v; want no scopes", info, err)
	}
	for _, secret := range []string{forOther.Secret, "hgr_nope", ""} {
		if _, err := verify(ctx, secret, nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
			t.Errorf("verify(%q) = %v, want ErrInvalidToken", secret, err)
		}
	}
	if _, ok := principalFromTokenInfo(nil); ok {
		t.Error("principalFromTokenInfo(nil) is ok")
	}
}
