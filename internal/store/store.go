// Package store is hangar's persistence: the Store interface, its records and its errors. The
// sqlite and postgres subpackages open the two implementations (both built on sqlstore), and
// storetest is the one test suite they both pass.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/problem"
)

// Store is everything hangar keeps. Implementations are safe for concurrent use.
type Store interface {
	// Ping answers nil when the database answers; /readyz uses it.
	Ping(ctx context.Context) error
	Close() error

	// EnsureUser creates the user if there is none of that name, and returns it.
	EnsureUser(ctx context.Context, name string) (User, error)

	// CreateToken stores a new token. ErrConflict when its id or hash is taken; its user must
	// exist.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash finds a token by the hash of its secret, revoked or not. ErrNotFound if none.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// TokenByID finds a token by id, revoked or not. ErrNotFound if none.
	TokenByID(ctx context.Context, id string) (Token, error)
	// ListTokens lists the tokens that are not revoked, oldest first: a user's, or everyone's
	// when user is "".
	ListTokens(ctx context.Context, user string) ([]Token, error)
	// RevokeToken marks a token revoked at the given time. ErrNotFound if there is no such
	// token or it was already revoked.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// CountTokens counts all tokens ever made, revoked ones included.
	CountTokens(ctx context.Context) (int, error)
	// CreateTokenWithin is CreateToken, unless t's user holds max live tokens at at already
	// (LiveTokens): then ErrLimit, and nothing stored. max <= 0: no bound. The count and the
	// insert are one transaction, which takes the user's row first, so concurrent requests for
	// one user cannot pass the bound together.
	CreateTokenWithin(ctx context.Context, t Token, max int, at time.Time) error
	// LiveTokens counts what a user holds that can act: tokens neither revoked nor expired at
	// at, other than OAuth access tokens, and OAuth grants not revoked that can still issue one
	// (an authorization code or a refresh token neither used nor expired). A grant counts once,
	// however many access tokens its refreshes made.
	LiveTokens(ctx context.Context, user string, at time.Time) (int, error)

	// CreateSandbox stores a new sandbox. A row of the same name in state destroyed, or failed
	// and of the same owner, is replaced; any other is ErrConflict (a failed sandbox keeps its
	// name from other users until its owner deletes it, as a dead container keeps its name).
	CreateSandbox(ctx context.Context, sb Sandbox) error
	// GetSandbox finds a sandbox by name. ErrNotFound if none.
	GetSandbox(ctx context.Context, name string) (Sandbox, error)
	// ListSandboxes lists sandboxes by name: an owner's, or everyone's when owner is "".
	ListSandboxes(ctx context.Context, owner string) ([]Sandbox, error)
	// UpdateSandbox rewrites a sandbox's mutable fields (all but name, owner, provider,
	// created_at, metadata, end_at and on_timeout: SetSandboxEnd moves the end). ErrNotFound if there is no such sandbox. ErrConflict, and nothing written, if
	// the stored one is destroyed or is another sandbox of the name (its created_at is not
	// sb's): a destroyed sandbox stays destroyed, whatever a caller that read it before the
	// destroy writes.
	UpdateSandbox(ctx context.Context, sb Sandbox) error
	// SetSandboxEnd sets when the sandbox name made at createdAt is due to end (zero: never),
	// the way UpdateSandbox writes: ErrNotFound if there is no such sandbox, ErrConflict (and
	// nothing written) if it is destroyed or is another sandbox of the name.
	SetSandboxEnd(ctx context.Context, name string, createdAt, endAt time.Time) error
	// DueSandboxes lists the running sandboxes whose end is set and at or before at, the
	// earliest first, at most limit of them.
	DueSandboxes(ctx context.Context, at time.Time, limit int) ([]Sandbox, error)

	// CreateProcess stores a background process that was just started. ErrConflict when its id
	// is taken.
	CreateProcess(ctx context.Context, p Process) error
	// EndProcess records that a running process ended. ErrNotFound if there is no such process
	// or it had already ended (the first end recorded stays).
	EndProcess(ctx context.Context, id string, exitCode int, status string, at time.Time) error
	// SetProcessOutput records how far the output offsets of a running process have been given
	// out (Process.OutputEnd). ErrNotFound if there is no such process or it has ended (an
	// ended record keeps what it had).
	SetProcessOutput(ctx context.Context, id string, end int64) error
	// ListRunningProcesses lists the processes whose record says they run, oldest first.
	ListRunningProcesses(ctx context.Context) ([]Process, error)
	// ListProcesses lists the processes of sandbox (every sandbox's when it is "") whose record
	// says they run, or that ended at or after since, oldest first.
	ListProcesses(ctx context.Context, sandbox string, since time.Time) ([]Process, error)
	// GetProcess finds a process by id. ErrNotFound if none.
	GetProcess(ctx context.Context, id string) (Process, error)
	// DeleteEndedProcesses forgets the processes that ended before the given time, and says
	// how many. A running process's record is never deleted.
	DeleteEndedProcesses(ctx context.Context, before time.Time) (int, error)

	TurnStore
	FleetStore
	OAuthStore
	ReplicaStore
}

// Process is a stored background process: who started it where, and what binds the record to
// one process instance in the sandbox's daemon (its tag and pid).
type Process struct {
	ID        string
	TokenID   string // the token that started it (its owner)
	User      string // that token's user
	Grant     string // "": none; else the OAuth grant that issued that token
	Sandbox   string
	Command   string
	Cwd       string
	Tag       string // the daemon's tag of the process
	PID       uint32 // the daemon's pid of the process; 0 without a daemon
	PTY       bool
	Daemon    bool   // followed through the daemon (else polled)
	State     string // running, exited
	ExitCode  *int   // nil while running
	Status    string // how it ended, for a person
	StartedAt time.Time
	EndedAt   time.Time // zero while running
	// OutputEnd is an output offset no offset hangar gave out for the process exceeds: while it
	// runs, a mark reserved ahead of the output; once it ended, its end. A control plane that
	// adopts the process carries on from here, so offsets never go back.
	OutputEnd int64
}

// Sandbox is a stored sandbox: what was asked for and what the provider made of it.
type Sandbox struct {
	Name        string
	Owner       string // the user who made it
	Provider    string // local, docker, kubernetes, e2b
	ProviderID  string // the provider's own id
	State       string // creating, running, paused, destroyed, failed
	Reason      string // why it failed, for a person
	Image       string
	Template    string
	Workdir     string
	Env         map[string]string
	Daemon      bool   // asked to have a daemon
	DaemonURL   string // "": it has none
	DaemonToken string
	Data        map[string]string // the provider's own facts
	Metadata    map[string]string // the creator's labels (the E2B API's metadata)
	EndAt       time.Time         // when it is due to end (OnTimeout); zero: never
	OnTimeout   string            // what ends it at EndAt: OnTimeoutKill ("" too) or OnTimeoutPause
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// What happens to a sandbox at its EndAt.
const (
	OnTimeoutKill  = "kill"  // destroyed (the default)
	OnTimeoutPause = "pause" // paused
)

// User is a person (or a service) that tokens belong to.
type User struct {
	Name      string
	CreatedAt time.Time
}

// Token is a stored token. The secret itself is never stored: only its hash.
type Token struct {
	ID          string
	User        string
	Hash        string    // hex SHA-256 of the secret
	Hint        string    // the secret's first characters, to recognise it in a list
	Description string    // what it is for, as its creator said
	Scopes      []string  // admin, user, mcp, jobs
	Sandbox     string    // "": any sandbox the user may see; else the one it is bound to
	Audience    string    // "": any; else the resource (RFC 8707) an OAuth access token is for
	Grant       string    // "": none; else the OAuth grant that issued it (set by AddOAuthToken)
	CreatedBy   string    // the id of the token that created it ("" for the first admin token)
	CreatedAt   time.Time //
	ExpiresAt   time.Time // zero: never
	RevokedAt   time.Time // zero: not revoked
}

// Errors of every Store, to be tested with errors.Is.
var (
	// ErrNotFound means no record matched.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique key is taken.
	ErrConflict = errors.New("already exists")
	// ErrUnavailable means the database did not answer: it refused the connection, the
	// connection broke, it is shutting down or starting, it has no connection slot left, or
	// (SQLite) another writer held it past the busy timeout. Trying again later may work.
	// What hangar's own store lacks is what a client is told, whatever it asked; the cause
	// (which names the database's address) stays in the server's log.
	ErrUnavailable error = &problem.Sentinel{Text: "the database does not answer", Code: problem.CodeUnavailable,
		Message: "hangar's database does not answer; try again in a moment.", RetryAfter: problem.StoreRetryAfter, Quiet: true, Outranks: true}
	// ErrFull means the database could not write because its disk is full (ENOSPC,
	// SQLITE_FULL, PostgreSQL's disk_full). Reads may still work.
	ErrFull error = &problem.Sentinel{Text: "the database's disk is full", Code: problem.CodeUnavailable,
		Message: "hangar's disk is full: its database cannot write; free space where its data is kept, then try again.", RetryAfter: problem.StoreFullRetryAfter, Quiet: true, Outranks: true}
	// ErrBusy means every connection hangar may have to the database was in use for as long as
	// a call may wait for one (HANGAR_DATABASE_WAIT), or the database server has no connection
	// slot left (PostgreSQL's too_many_connections). It always comes wrapped with
	// ErrUnavailable too: trying again in a moment may work.
	ErrBusy error = &problem.Sentinel{Text: "every connection to the database is in use", Code: problem.CodeUnavailable,
		Message: "hangar's database is busy: every connection to it is in use; try again in a moment.", RetryAfter: problem.StoreBusyRetryAfter, Quiet: true, Outranks: true}
)

// Unavailable wraps err in ErrUnavailable or ErrFull when it is the operating system's way of
// saying so (a refused or broken connection, a timeout, ENOSPC), for the store implementations
// to call after their own database's codes; other errors come back as they are.
func Unavailable(err error) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrFull):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: %w", ErrFull, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// ErrLimit means a write would pass a bound the caller gave (e.g. unused tickets per token, live
// tokens per user); nothing was written.
var ErrLimit = errors.New("limit reached")
