package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/auth"
)

// verifier fits go-sdk's auth.TokenVerifier to a: it authenticates the token and requires the
// mcp scope. The principal travels in TokenInfo.Extra["principal"] and the token id in UserID,
// so a session cannot be taken over by another token. (This glue lives here, not in auth, so
// that auth does not depend on the MCP SDK.)
func verifier(a *auth.Authenticator) sdkauth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p, err := a.Authenticate(ctx, token)
		if err != nil {
			if errors.Is(err, auth.ErrNoToken) || errors.Is(err, auth.ErrUnknownToken) ||
				errors.Is(err, auth.ErrRevoked) || errors.Is(err, auth.ErrExpired) {
				return nil, fmt.Errorf("%w: %v", sdkauth.ErrInvalidToken, err)
			}
			return nil, err
		}
		if !p.Has(auth.ScopeMCP) {
			return nil, fmt.Errorf("%w: the token lacks the mcp scope", sdkauth.ErrInvalidToken)
		}
		info := &sdkauth.TokenInfo{UserID: p.TokenID, Expiration: p.ExpiresAt, Extra: map[string]any{"principal": p}}
		for _, s := range p.Scopes {
			info.Scopes = append(info.Scopes, string(s))
		}
		return info, nil
	}
}

// principalFromTokenInfo returns the principal verifier put into info.
func principalFromTokenInfo(info *sdkauth.TokenInfo) (auth.Principal, bool) {
	if info == nil {
		return auth.Principal{}, false
	}
	p, ok := info.Extra["principal"].(auth.Principal)
	return p, ok
}
