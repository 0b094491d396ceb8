// Package provider defines where sandboxes live. A Provider creates, finds, pauses, resumes and
// destroys sandboxes, and runs a command in one with its own exec (the fallback when a sandbox
// has no daemon). Implementations live in the local, docker, kubernetes and e2b subpackages;
// their SDK types never leave them.
package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/names"
)

// State is where a sandbox is in its life. It only moves forward, except running <-> paused.
type State string

// The states of a sandbox.
const (
	StateCreating  State = "creating"
	StateRunning   State = "running"
	StatePaused    State = "paused"
	StateDestroyed State = "destroyed"
	StateFailed    State = "failed"
)

// Spec is what a sandbox is created from.
type Spec struct {
	Name     string            // lowercase DNS label, unique; providers use it in their own names
	Owner    string            // the user who created it (for labels and metadata only)
	Image    string            // docker, kubernetes: the image; empty means the provider's default
	Template string            // e2b: the template; empty means the provider's default
	Workdir  string            // the sandbox's repo folder; empty means the provider's default
	Env      map[string]string // environment for every command in the sandbox
	Daemon   bool              // run hangar's daemon (or use E2B's) in the sandbox
}

// Daemon is how the control plane reaches a sandbox's daemon.
type Daemon struct {
	// URL is http://host:port, https://host for E2B, or unix:///path/to/socket.
	URL string `json:"url"`
	// AccessToken goes in X-Access-Token on every request but /health.
	AccessToken string `json:"access_token,omitempty"`
}

// Sandbox is a provider's view of one sandbox. The control plane stores it as it is returned and
// hands it back on every later call, so a provider keeps whatever it needs to find the sandbox
// again (a container id, a pid) in ID and Data.
type Sandbox struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	ID       string            `json:"id"` // the provider's own id: container id, pod name, E2B sandbox id, folder
	State    State             `json:"state"`
	Reason   string            `json:"reason,omitempty"` // for StateFailed: what went wrong, for a person
	Workdir  string            `json:"workdir"`
	Daemon   *Daemon           `json:"daemon,omitempty"` // nil when the sandbox has no daemon
	Data     map[string]string `json:"data,omitempty"`   // provider-specific facts to keep
}

// ExecRequest is one command for a provider's own exec. Command is a shell command line; the
// provider runs it as `bash -lc`, or `sh -c` where the sandbox has no bash.
type ExecRequest struct {
	Command string
	Cwd     string            // empty: the sandbox's workdir
	Env     map[string]string // added to the sandbox's environment
	Timeout time.Duration     // zero: none beyond ctx
}

// ExecResult is how a command ended. Stdout and Stderr hold at most the last MaxExecOutput bytes
// of each.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	TimedOut bool // the command was killed because Timeout passed
}

// MaxExecOutput is how much of each of stdout and stderr an exec result keeps: the last 256 KiB.
const MaxExecOutput = 256 << 10

// Provider creates and runs sandboxes of one kind.
type Provider interface {
	// Name is the provider's name in the API: local, docker, kubernetes or e2b.
	Name() string
	// Create makes a sandbox and waits until it is running (and its daemon answers, when it has
	// one). A sandbox that could not be made returns an error; one that was made but is unusable
	// comes back with StateFailed and a Reason.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Get refreshes a stored sandbox: its state as the provider sees it now.
	Get(ctx context.Context, sb Sandbox) (Sandbox, error)
	// List returns the sandboxes this provider made that still exist, so a restarted control
	// plane can find them again.
	List(ctx context.Context) ([]Sandbox, error)
	Destroy(ctx context.Context, sb Sandbox) error
	Pause(ctx context.Context, sb Sandbox) (Sandbox, error)
	Resume(ctx context.Context, sb Sandbox) (Sandbox, error)
	// Exec runs a command with the provider's own exec, not through the daemon.
	Exec(ctx context.Context, sb Sandbox, req ExecRequest) (ExecResult, error)
}

// SpecChecker is a Provider that can tell, before anything is made or stored, that it would
// refuse a spec for the request's own fault (a local sandbox's workdir that is its folder
// itself). The error is a sentence for a person; the caller answers it as bad input.
type SpecChecker interface {
	CheckSpec(spec Spec) error
}

// Errors a provider returns, to be tested with errors.Is.
var (
	// ErrNotFound means the sandbox no longer exists at the provider.
	ErrNotFound = errors.New("sandbox not found at the provider")
	// ErrUnavailable means the provider's service (the Docker engine, the cluster, E2B's API)
	// does not answer.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrImageMissing means the image is not there and cannot be pulled. The error that wraps
	// it names the image and says how to get it: that is what a client is told.
	ErrImageMissing error = imageMissing{}
	// ErrUnsupported means the provider cannot do what was asked (e.g. pause on kubernetes).
	ErrUnsupported = errors.New("not supported by this provider")
)

// TailBuffer is an io.Writer that keeps only the last Max bytes written to it (MaxExecOutput
// when Max is zero), so a command's output cannot grow a result without bound. It is not safe
// for concurrent use: give each stream its own.
type TailBuffer struct {
	Max int
	// buf holds up to 2*Max bytes, of which the last Max are kept; compacting only when it is
	// full keeps Write amortised O(len(p)).
	buf     []byte
	written int64
}

// Write keeps the end of p and of what came before; it never fails.
func (b *TailBuffer) Write(p []byte) (int, error) {
	limit := b.limit()
	b.written += int64(len(p))
	if len(p) >= limit {
		b.buf = append(b.buf[:0], p[len(p)-limit:]...)
		return len(p), nil
	}
	if len(b.buf)+len(p) > 2*limit {
		keep := limit - len(p)
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-keep:]...)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Bytes returns the bytes kept: the last Max written.
func (b *TailBuffer) Bytes() []byte {
	if limit := b.limit(); len(b.buf) > limit {
		return b.buf[len(b.buf)-limit:]
	}
	return b.buf
}

// Dropped returns how many bytes were written but are no longer kept.
func (b *TailBuffer) Dropped() int64 { return b.written - int64(len(b.Bytes())) }

func (b *TailBuffer) limit() int {
	if b.Max <= 0 {
		return MaxExecOutput
	}
	return b.Max
}

// ShellScript is the /bin/sh program that runs a command line for a provider's exec: with bash
// as a login shell when the sandbox has it, else with sh. It drops the daemon's access token
// from the environment, where a container's configuration may have put it. The command is passed as the script's
// first argument ($1), never spliced into the script, so it needs no quoting:
//
//	sh -c ShellScript hangar-exec "echo hi"
const ShellScript = `unset HANGAR_ENVD_ACCESS_TOKEN; if command -v bash >/dev/null 2>&1; then exec bash -lc "$1"; fi; exec sh -c "$1"`

// ShellArgv is the argv that runs command under ShellScript.
func ShellArgv(command string) []string {
	return []string{"/bin/sh", "-c", ShellScript, "hangar-exec", command}
}

// CheckName reports whether name can name a sandbox: names.CheckSandbox, kept here for the
// callers that already hold the provider package.
func CheckName(name string) error { return names.CheckSandbox(name) }

// NewAccessToken returns a new daemon access token: 32 random bytes, hex-encoded.
func NewAccessToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make access token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ExecMarkerEnv tags every process of one provider exec (ExecMarkerEnv=<random>), for
// providers whose exec API cannot kill what it started (docker exec, pods/exec): on timeout
// they run KillMarkedScript in a second exec.
const ExecMarkerEnv = "HANGAR_EXEC_ID"

// KillMarkedScript is the /bin/sh program that SIGKILLs every process whose environment holds
// its first argument ("HANGAR_EXEC_ID=<marker>"). The marker is in the script's argv, never its
// environment, so it does not kill itself. environ is NUL-separated, which some greps
// (busybox's) cannot search: tr makes it lines. It needs tr, grep and kill in the sandbox.
const KillMarkedScript = `for d in /proc/[0-9]*; do tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$1" && kill -9 "${d#/proc/}" 2>/dev/null; done; true`
