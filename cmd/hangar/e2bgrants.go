package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// tokenGrants is the E2B daemon pass-through's Grants until the E2B API mints envdAccessTokens
// of its own (e2bapi's Grants): the access token a daemon call carries is a hangar token (a
// user token's secret, the E2B_API_KEY), and the grant is that token's reach of the sandbox
// named by the E2B sandbox id (hangar's name), as the REST API's. Swap it for the API's one
// line in serve once that is in.
type tokenGrants struct {
	auth      *auth.Authenticator
	sandboxes *sandbox.Manager
}

func (g tokenGrants) Mint(context.Context, auth.Principal, string) (string, error) {
	return "", errors.New("hangar's E2B daemon pass-through takes hangar tokens as access tokens; it mints none")
}

func (g tokenGrants) Check(ctx context.Context, sandboxID, accessToken string) (e2bapi.Grant, error) {
	p, err := g.auth.Authenticate(ctx, accessToken)
	if err == nil && p.Audience != "" {
		err = auth.ErrAudience // an OAuth access token is /mcp's only
	}
	if err != nil {
		return e2bapi.Grant{}, fmt.Errorf("%w: %w", e2bapi.ErrAccessDenied, err)
	}
	sb, err := g.sandboxes.Runnable(ctx, p, sandboxID)
	if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrState) {
		return e2bapi.Grant{}, fmt.Errorf("%w: %w", e2bapi.ErrNoSandbox, err)
	}
	if err != nil {
		return e2bapi.Grant{}, err
	}
	return e2bapi.Grant{Principal: p, Sandbox: sb}, nil
}
