package e2bapi

// The shared contract between the E2B API's two halves, as h1's grants.go declares it (the
// brief's text, word for word in its declarations). This file only lets the daemon pass-through
// build on its own: when h1's grants.go is merged, delete it.

import (
	"context"
	"errors"

	"github.com/hangar-dev/hangar/internal/auth"
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

var (
	// ErrAccessDenied is an envdAccessToken that is wrong, forged or revoked.
	ErrAccessDenied = errors.New("the access token is not valid for this sandbox")
	// ErrNoSandbox is a sandbox id that names no sandbox the token's principal may reach.
	ErrNoSandbox = errors.New("no such sandbox")
)
