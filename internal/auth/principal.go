// Package auth is hangar's tokens: making them, checking them on every request, rechecking them
// for open streams, and revoking them. A token is random, stored only as a hash, belongs to a
// user, carries scopes, may expire, and may be bound to one sandbox.
package auth

import (
	"context"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/problem"
)

// Scope is what a token may do.
type Scope string

// The scopes. ScopeAdmin implies every other.
const (
	ScopeAdmin Scope = "admin" // everything, every user's resources
	ScopeUser  Scope = "user"  // the REST API as its user
	ScopeMCP   Scope = "mcp"   // the /mcp endpoint
	ScopeJobs  Scope = "jobs"  // the jobs API, seeing only its own jobs
)

// Scopes lists every scope, in a fixed order.
var Scopes = []Scope{ScopeAdmin, ScopeUser, ScopeMCP, ScopeJobs}

func validScope(s Scope) bool { return slices.Contains(Scopes, s) }

// Principal is who a request (or a stream) acts for: the token that was presented.
type Principal struct {
	TokenID   string
	User      string
	Scopes    []Scope
	Sandbox   string    // "": not bound; else the one sandbox this token may touch
	ExpiresAt time.Time // zero: never
	Static    bool      // from the tokens file, not the store
	Audience  string    // "": any resource; else the only resource (RFC 8707) it may be used at
	Grant     string    // "": none; else the OAuth grant that issued it (see Check)
	Page      bool      // a Fleet page's token (PageToken): it makes no tokens and signs no page in
}

// Has reports whether the principal holds scope s. Admins hold them all; a bound principal
// with the admin scope (a tokens-file line may give one) acts as a bound token of the user
// scope, so its admin scope adds only that.
func (p Principal) Has(s Scope) bool {
	if slices.Contains(p.Scopes, s) {
		return true
	}
	return slices.Contains(p.Scopes, ScopeAdmin) && (p.Sandbox == "" || s == ScopeUser)
}

// IsAdmin reports whether the principal acts as an admin: it has the admin scope and is not
// bound to a sandbox. A bound token is confined to its sandbox whatever its scopes say (the API
// refuses to make one with the admin scope; a tokens-file line may still have one).
func (p Principal) IsAdmin() bool { return p.Sandbox == "" && slices.Contains(p.Scopes, ScopeAdmin) }

// AtMCP is p as it acts at the /mcp endpoint. Scopes add up: there the mcp scope reaches all
// its user's sandboxes, sessions and jobs, so a jobs scope beside it (an OAuth grant with both
// ticked) restricts nothing and is left out; the domain's jobs-only rules (a jobs token sees
// only its own jobs) then do not apply. Elsewhere (the REST API) the token keeps its scopes.
func (p Principal) AtMCP() Principal {
	if !p.Has(ScopeMCP) || !slices.Contains(p.Scopes, ScopeJobs) {
		return p
	}
	p.Scopes = slices.DeleteFunc(slices.Clone(p.Scopes), func(s Scope) bool { return s == ScopeJobs })
	return p
}

// For reports whether the principal's token may be used at resource: a token with no audience
// anywhere, an OAuth access token only at the resource it was issued for.
func (p Principal) For(resource string) bool { return p.Audience == "" || p.Audience == resource }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal in ctx, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNoToken means the request carried no bearer token.
	ErrNoToken error = &problem.Sentinel{Text: "no bearer token", Code: problem.CodeUnauthorized,
		Message: "This request needs a token: send 'Authorization: Bearer <token>'."}
	// ErrUnknownToken means the token is not one hangar made or was given.
	ErrUnknownToken error = &problem.Sentinel{Text: "unknown token", Code: problem.CodeUnauthorized,
		Message: "The token is not one hangar knows."}
	// ErrRevoked means the token was revoked.
	ErrRevoked error = &problem.Sentinel{Text: "token revoked", Code: problem.CodeUnauthorized, Message: "The token was revoked."}
	// ErrAudience means the token was issued for one resource (RFC 8707: an OAuth access token,
	// for /mcp) and is presented at another.
	ErrAudience error = &problem.Sentinel{Text: "token issued for another resource", Code: problem.CodeUnauthorized,
		Message: "The token was issued for another resource: an OAuth access token is good only at the /mcp it was issued for."}
	// ErrExpired means the token's expiry has passed.
	ErrExpired error = &problem.Sentinel{Text: "token expired", Code: problem.CodeUnauthorized, Message: "The token has expired."}
	// ErrForbidden means the token is valid but its scopes or binding do not allow the action.
	ErrForbidden error = &problem.Sentinel{Text: "not allowed", Code: problem.CodeForbidden, Message: "The token is not allowed to do that."}
	// ErrInvalid means a request to make a token was malformed.
	ErrInvalid error = &problem.Sentinel{Text: "invalid token request", Code: problem.CodeBadRequest, Message: "The token request is not valid."}
	// ErrNotFound means no token of that id is visible to the caller.
	ErrNotFound error = &problem.Sentinel{Text: "token not found", Code: problem.CodeNotFound, Message: "There is no such token."}
	// ErrStatic means the token comes from the tokens file and can only be changed there.
	ErrStatic error = &problem.Sentinel{Text: "static token", Code: problem.CodeConflict,
		Message: "That token comes from the tokens file and can only be changed there."}
	// ErrNoSandbox means a token was to be bound to a sandbox that does not exist or that the
	// caller may not see: the two are one answer, so a token cannot probe other users' names.
	ErrNoSandbox error = &problem.Sentinel{Text: "no such sandbox", Code: problem.CodeNotFound,
		Message: "There is no such sandbox, or it is not yours."}
)
