package e2bapi

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
)

// Grant is what an envdAccessToken stands for: the hangar token (principal) that created or
// connected to the sandbox, and the sandbox.
type Grant struct {
	Principal auth.Principal
	Sandbox   store.Sandbox
}

// Grants mints the envdAccessToken the E2B API hands out and checks the one a daemon call carries.
type Grants interface {
	// Mint returns the envdAccessToken for p's use of the sandbox named name (hangar's name).
	Mint(ctx context.Context, p auth.Principal, name string) (string, error)
	// Check returns the grant the token stands for if it is valid for the E2B sandbox id, the
	// token behind it still valid (not revoked or expired), and its principal may still reach
	// the sandbox; else an error that wraps ErrAccessDenied (wrong/forged/revoked) or
	// ErrNoSandbox (no such sandbox, or not this principal's: E2B answers not found).
	Check(ctx context.Context, sandboxID, accessToken string) (Grant, error)
}

// Errors of Grants.Check, to be tested with errors.Is.
var (
	// ErrAccessDenied means the access token is not one hangar minted for this sandbox, or the
	// hangar token behind it was revoked or expired, or may no longer use the E2B API.
	ErrAccessDenied error = &problem.Sentinel{Text: "access denied", Code: problem.CodeUnauthorized,
		Message: "The sandbox's access token is not valid: it was not issued for this sandbox, or the hangar token it was issued to was revoked or expired."}
	// ErrNoSandbox means there is no such sandbox any more, or it is not the token's to use.
	ErrNoSandbox error = &problem.Sentinel{Text: "no such sandbox", Code: problem.CodeNotFound,
		Message: "There is no such sandbox, or this token may not use it."}
)

// SandboxID is the E2B sandbox id of the hangar sandbox name: the name itself, so a sandbox made
// through hangar's own API is reached by the SDK as it is listed by `hangar sandbox ls`.
func SandboxID(name string) string { return name }

// SandboxName is the hangar sandbox an E2B sandbox id names; false if it can name none.
func SandboxName(id string) (string, bool) {
	return id, names.CheckSandbox(id) == nil
}

// grantPurpose derives the access tokens' key from the control plane's secret (HKDF info), so
// that key opens nothing else the secret keys.
const grantPurpose = "hangar e2b envd access token v1"

// grants is Grants as an HMAC-SHA256, under a key derived from the control plane's secret, over
// the hangar token's id and the sandbox (its name and the moment it was made, so a name made
// again is another sandbox): "<token id>.<mac>". Why a MAC and not a stored random secret:
// nothing is written per create or connect (a connect from every serverless call would add rows
// without end), every replica checks it from the secret they share (HANGAR_SECRET), and what
// makes it invalid is exactly what should: the token's revocation or expiry (asked of auth on
// every check) and the principal's losing the sandbox (asked of the sandbox manager). A token
// minted for one sandbox names no other, and one principal's cannot be turned into another's.
type grants struct {
	key       []byte
	auth      *auth.Authenticator
	sandboxes *sandbox.Manager
}

// NewGrants returns the Grants of this control plane; secret is its HANGAR_SECRET (at least 32
// bytes, the same on every replica).
func NewGrants(secret []byte, a *auth.Authenticator, sandboxes *sandbox.Manager) (Grants, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("derive the e2b access tokens' key: the secret has %d bytes, at least 32 are needed", len(secret))
	}
	key, err := hkdf.Key(sha256.New, secret, nil, grantPurpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the e2b access tokens' key: %w", err)
	}
	return &grants{key: key, auth: a, sandboxes: sandboxes}, nil
}

func (g *grants) mac(tokenID string, sb store.Sandbox) []byte {
	h := hmac.New(sha256.New, g.key)
	h.Write([]byte(tokenID + "\x00" + sb.Name + "\x00" + strconv.FormatInt(sb.CreatedAt.UnixMilli(), 10)))
	return h.Sum(nil)
}

// Mint implements Grants.
func (g *grants) Mint(ctx context.Context, p auth.Principal, name string) (string, error) {
	sb, err := g.sandboxes.Get(ctx, p, name)
	if err != nil {
		return "", err
	}
	return p.TokenID + "." + base64.RawURLEncoding.EncodeToString(g.mac(p.TokenID, sb)), nil
}

// Check implements Grants. A token that does not verify is ErrAccessDenied whether or not the
// sandbox exists, so that guessing ids learns nothing; one that does names a sandbox its holder
// was given, and then a sandbox gone, or no longer theirs, is ErrNoSandbox.
func (g *grants) Check(ctx context.Context, sandboxID, accessToken string) (Grant, error) {
	name, ok := SandboxName(sandboxID)
	if !ok {
		return Grant{}, fmt.Errorf("%w: %.70q is not a sandbox id", ErrNoSandbox, sandboxID)
	}
	tokenID, mac64, ok := strings.Cut(accessToken, ".")
	mac, err := base64.RawURLEncoding.DecodeString(mac64)
	if !ok || tokenID == "" || err != nil {
		return Grant{}, fmt.Errorf("%w: the access token is malformed", ErrAccessDenied)
	}
	sb, err := g.sandboxes.Lookup(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return Grant{}, fmt.Errorf("%w: no access token was issued for sandbox %s", ErrAccessDenied, name)
	}
	if err != nil {
		return Grant{}, err
	}
	if !hmac.Equal(mac, g.mac(tokenID, sb)) {
		return Grant{}, fmt.Errorf("%w: the access token was not issued for sandbox %s", ErrAccessDenied, name)
	}
	p, err := g.auth.Principal(ctx, tokenID)
	switch {
	case errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrExpired), errors.Is(err, auth.ErrUnknownToken):
		return Grant{}, fmt.Errorf("%w: %w", ErrAccessDenied, err)
	case err != nil:
		return Grant{}, err
	}
	if err := usable(p); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	// What Authenticate asks of a token beyond its own record (a Fleet page token's maker
	// still valid, say), asked of the one behind the grant too.
	if err := g.auth.Check(ctx, p); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	sb, err = g.sandboxes.Get(ctx, p, name)
	if errors.Is(err, sandbox.ErrNotFound) {
		return Grant{}, fmt.Errorf("%w: %s", ErrNoSandbox, name)
	}
	if err == nil && sb.State != "running" {
		// A paused sandbox's daemon is stopped: a call would hang rather than fail.
		return Grant{}, fmt.Errorf("%w: %s is %s", ErrNoSandbox, name, sb.State)
	}
	if err != nil {
		return Grant{}, err
	}
	return Grant{Principal: p, Sandbox: sb}, nil
}

// usable reports whether p may use the E2B API at all (as authenticate asks of an API key): not
// an OAuth access token (those are for /mcp), and with the user scope.
func usable(p auth.Principal) error {
	if p.Audience != "" {
		return auth.ErrAudience
	}
	if !p.Has(auth.ScopeUser) {
		return errors.New("the token lacks the user scope")
	}
	return nil
}
