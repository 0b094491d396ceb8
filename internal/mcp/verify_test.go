package mcp

import (
	"context"
	"errors"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
)

// TestVerifier: a token with the mcp scope passes and carries its principal; one without it,
// and an unknown one, are ErrInvalidToken (a 401 from the SDK's middleware).
func TestVerifier(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, t.TempDir())
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
	verify := verifier(a)
	info, err := verify(ctx, withMCP, nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if p, ok := principalFromTokenInfo(info); !ok || p.User != "ada" || info.UserID != p.TokenID {
		t.Errorf("principal from token info = %+v, %v (UserID %q)", p, ok, info.UserID)
	}
	for _, secret := range []string{withoutMCP, "hgr_nope", ""} {
		if _, err := verify(ctx, secret, nil); !errors.Is(err, sdkauth.ErrInvalidToken) {
			t.Errorf("verify(%q) = %v, want ErrInvalidToken", secret, err)
		}
	}
	if _, ok := principalFromTokenInfo(nil); ok {
		t.Error("principalFromTokenInfo(nil) is ok")
	}
}
