package oauth_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newServer is an authorization server over SQLite, with no HTTP in front of it.
func newServer(t *testing.T) *oauth.Server {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := auth.New(ctx, auth.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	o, err := oauth.New(oauth.Config{Store: s, Auth: a, Issuer: "https://hangar.example"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDecisionsWithoutHTTP: the server's decisions come back as typed errors a transport
// renders — an *Error in OAuth's terms, a *RefusedError for a request whose client cannot be
// trusted — and a registration is a client it then knows.
func TestDecisionsWithoutHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newServer(t)
	var oe *oauth.Error
	if _, err := o.Register(ctx, oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://app.example/cb"}}); !errors.As(err, &oe) || oe.Code != "invalid_redirect_uri" {
		t.Errorf("register an http redirect: %v, want invalid_redirect_uri", err)
	}
	c, err := o.Register(ctx, oauthex.ClientRegistrationMetadata{ClientName: "app", RedirectURIs: []string{"https://app.example/cb"}})
	if err != nil || c.Metadata.TokenEndpointAuthMethod != "none" {
		t.Fatalf("register: %+v, %v", c, err)
	}
	var re *oauth.RefusedError
	if _, err := o.ParseAuthRequest(ctx, url.Values{"client_id": {"hc_nobody"}}); !errors.As(err, &re) {
		t.Errorf("an unknown client: %v, want a *RefusedError", err)
	}
	ar, err := o.ParseAuthRequest(ctx, url.Values{"client_id": {c.ID}, "response_type": {"token"}})
	if !errors.As(err, &oe) || oe.Code != "unsupported_response_type" || ar.Client.Name != "app" {
		t.Errorf("a bad request of a known client: %+v, %v, want unsupported_response_type naming app", ar, err)
	}
	if _, err := o.Token(ctx, "hc_nobody", url.Values{"grant_type": {"authorization_code"}}); !errors.As(err, &oe) || oe.Code != "invalid_client" {
		t.Errorf("token for an unknown client: %v, want invalid_client", err)
	}
}
