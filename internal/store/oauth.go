package store

import (
	"context"
	"errors"
	"time"
)

// OAuthStore keeps what hangar's OAuth authorization server needs (internal/oauth): registered
// clients, grants, authorization codes and refresh tokens. Codes and refresh tokens are kept
// only as hashes, like tokens.
type OAuthStore interface {
	// CreateOAuthClient stores a dynamically registered client. ErrConflict when its id is
	// taken.
	CreateOAuthClient(ctx context.Context, c OAuthClient) error
	// GetOAuthClient finds a registered client. ErrNotFound if none.
	GetOAuthClient(ctx context.Context, id string) (OAuthClient, error)

	// CreateOAuthGrant stores a grant a person consented to, with its authorization code.
	CreateOAuthGrant(ctx context.Context, g OAuthGrant, code OAuthCode) error
	// CreateOAuthGrantWithin is CreateOAuthGrant, unless g's user holds max live tokens at at
	// already (LiveTokens counts grants too): then ErrLimit, and nothing stored. max <= 0: no
	// bound. As with CreateTokenWithin, the count and the insert cannot race.
	CreateOAuthGrantWithin(ctx context.Context, g OAuthGrant, code OAuthCode, max int, at time.Time) error
	// GetOAuthGrant finds a grant, revoked or not. ErrNotFound if none.
	GetOAuthGrant(ctx context.Context, id string) (OAuthGrant, error)
	// ListOAuthGrants lists the grants that are not revoked, oldest first: a user's, or
	// everyone's when user is "".
	ListOAuthGrants(ctx context.Context, user string) ([]OAuthGrant, error)
	// RevokeOAuthGrant marks a grant revoked, with every access token it issued and its
	// refresh tokens, and returns the ids of the access tokens it revoked now. ErrNotFound if
	// there is no such grant or it was already revoked.
	RevokeOAuthGrant(ctx context.Context, id string, at time.Time) ([]string, error)

	// UseOAuthCode marks an authorization code used and returns it. ErrNotFound if there is
	// none of that hash; ErrUsed (with the code, whose grant should then be revoked) if it was
	// used before.
	UseOAuthCode(ctx context.Context, hash string, at time.Time) (OAuthCode, error)

	// AddOAuthToken stores the access token t as issued by grant (its Grant is set), and, when
	// refresh is not nil, the grant's next refresh token: in one transaction.
	// ErrNotFound (and nothing stored) if the grant is revoked or missing.
	AddOAuthToken(ctx context.Context, grantID string, t Token, refresh *OAuthRefresh) error
	// UseOAuthRefresh marks a refresh token used and returns it. ErrNotFound if there is none
	// of that hash; ErrUsed (with the token) if it was used before.
	UseOAuthRefresh(ctx context.Context, hash string, at time.Time) (OAuthRefresh, error)

	// OAuthRefreshGrant returns the grant of a refresh token, used or not. ErrNotFound if
	// there is no refresh token of that hash.
	OAuthRefreshGrant(ctx context.Context, hash string) (string, error)
	// DeleteExpiredOAuth forgets the authorization codes and refresh tokens that expired before
	// the given time, used or not, and says how many.
	DeleteExpiredOAuth(ctx context.Context, before time.Time) (int, error)
	// OAuthTokenGrant returns the grant that issued an access token. ErrNotFound if no grant
	// did (a token made through the API).
	OAuthTokenGrant(ctx context.Context, tokenID string) (string, error)
	// OAuthGrantRefreshable reports whether a grant has a refresh token neither used nor
	// expired at the given time: whether its client can still get a new access token.
	OAuthGrantRefreshable(ctx context.Context, grantID string, at time.Time) (bool, error)
}

// ErrUsed means a one-time secret (an authorization code, a refresh token) was used before.
var ErrUsed = errors.New("already used")

// OAuthClient is a client registered with RFC 7591 dynamic registration. Its secret-less: the
// clients are public and prove themselves with PKCE.
type OAuthClient struct {
	ID           string
	Name         string
	RedirectURIs []string
	CreatedAt    time.Time
}

// OAuthGrant is what a person consented to: a client acting as their user, with scopes,
// perhaps bound to a sandbox, for one resource.
type OAuthGrant struct {
	ID           string
	ClientID     string
	ClientName   string
	User         string
	Scopes       []string
	Sandbox      string // "": unbound
	Resource     string // the resource (RFC 8707) its access tokens are for
	ConsentToken string // the id of the token the person signed in with
	CreatedAt    time.Time
	RevokedAt    time.Time // zero: not revoked
}

// OAuthCode is an authorization code, kept by the hash of the code.
type OAuthCode struct {
	Hash          string
	GrantID       string
	RedirectURI   string
	CodeChallenge string // PKCE S256 challenge
	ExpiresAt     time.Time
	UsedAt        time.Time // zero: not used
}

// OAuthRefresh is a refresh token, kept by the hash of its secret.
type OAuthRefresh struct {
	Hash      string
	GrantID   string
	ExpiresAt time.Time
	UsedAt    time.Time // zero: not used
}
