// Package provider defines where sandboxes live. A Provider creates, finds, pauses, resumes and
// destroys sandboxes, and runs a command in one with its own exec (the fallback when a sandbox
// has no daemon). Implementations live in the local, docker, kubernetes and e2b subpackages;
// their SDK types never leave them.
package provider

import (
	"context"
	"errors"
	"time"
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

// Errors a provider returns, to be tested with errors.Is.
var (
	// ErrNotFound means the sandbox no longer exists at the provider.
	ErrNotFound = errors.New("sandbox not found at the provider")
	// ErrUnavailable means the provider's service (the Docker engine, the cluster, E2B's API)
	// does not answer.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrImageMissing means the image is not there and cannot be pulled.
	ErrImageMissing = errors.New("image not available")
	// ErrUnsupported means the provider cannot do what was asked (e.g. pause on kubernetes).
	ErrUnsupported = errors.New("not supported by this provider")
)
