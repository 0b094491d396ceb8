package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/auth"
)

// verifier fits go-sdk's auth.TokenVerifier to a: it authenticates the token and refuses one
// issued for another resource than resource (RFC 8707; an OAuth access token names the /mcp it
// was issued for, other tokens none). TokenInfo.Scopes holds "mcp" only when the token has that
// scope (admin implies it), so the SDK's scope check answers 403 insufficient_scope without it.
// The principal travels in TokenInfo.Extra["principal"], as it acts at /mcp (Principal.AtMCP:
// scopes add up), and its session owner in UserID, so a session cannot be taken over by another
// token (sessionOwner). (This glue lives here, not in auth, so that auth does not depend on the
// MCP SDK.)
// verifier checks a bearer token for the SDK. A failure that is not the token's fault is also
// left where checking (request → *error, filled by ServeHTTP) says, for jsonErrors to answer.
func verifier(a *auth.Authenticator, resource string, checking *sync.Map) sdkauth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*sdkauth.TokenInfo, error) {
		p, err := a.Authenticate(ctx, token)
		if err != nil {
			if errors.Is(err, auth.ErrNoToken) || auth.Dead(err) {
				return nil, fmt.Errorf("%w: %v", sdkauth.ErrInvalidToken, err)
			}
			// Not the token's fault (the store did not answer): the SDK answers it 500 in
			// plain text, so keep it for jsonErrors.finish to answer through the problem table.
			if held, ok := checking.Load(r); ok {
				*held.(*error) = err
			}
			return nil, err
		}
		if !p.For(resource) {
			return nil, fmt.Errorf("%w: the token was issued for another resource (%s)", sdkauth.ErrInvalidToken, p.Audience)
		}
		info := &sdkauth.TokenInfo{UserID: sessionOwner(p), Expiration: p.ExpiresAt, Extra: map[string]any{"principal": p.AtMCP()}}
		if p.Has(auth.ScopeMCP) {
			info.Scopes = []string{string(auth.ScopeMCP)}
		}
		return info, nil
	}
}

// sessionOwner is who a 2025-era session belongs to, for the SDK's check that every request
// in a session comes from its owner: the token, or for an OAuth access token its grant, so
// that the client goes on in its session with the token it refreshed.
func sessionOwner(p auth.Principal) string {
	if p.Grant != "" {
		return "grant:" + p.Grant
	}
	return p.TokenID
}

// principalFromTokenInfo returns the principal verifier put into info.
func principalFromTokenInfo(info *sdkauth.TokenInfo) (auth.Principal, bool) {
	if info == nil {
		return auth.Principal{}, false
	}
	p, ok := info.Extra["principal"].(auth.Principal)
	return p, ok
}
