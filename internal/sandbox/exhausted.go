package sandbox

import (
	"fmt"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/problem"
)

// ExhaustedError says that a sandbox's daemon is out of a resource it needs to start a command
// (file descriptors, processes, memory, disk): the sandbox is alive and the request was fine,
// so the caller may try again once the sandbox's processes free some.
type ExhaustedError struct {
	Sandbox string
	What    string // what it is out of: "file descriptors", "processes", ...
	cause   error
}

// Message is a sentence for a person: what is missing, and where.
func (e *ExhaustedError) Message() string {
	return fmt.Sprintf("The daemon of sandbox %s is out of %s, so it cannot start the command now; try again once the sandbox's processes free some.", e.Sandbox, e.What)
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("sandbox %s: the daemon is out of %s: %v", e.Sandbox, e.What, e.cause)
}

// Problem says what the daemon is out of; the daemon's own words are the detail.
func (e *ExhaustedError) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeUnavailable, Message: e.Message(), Detail: e.cause.Error(), RetryAfter: problem.ExhaustedRetryAfter}
}

// Unwrap gives the daemon's error.
func (e *ExhaustedError) Unwrap() error { return e.cause }

// Exhausted is the *ExhaustedError for err, from sb's daemon, when err says the daemon is out
// of a resource (envd.ErrExhausted); else nil. It is for every package that starts commands
// through a daemon, so they say it alike.
func Exhausted(sb string, err error) error {
	what, ok := envd.Exhausted(err)
	if !ok {
		return nil
	}
	return &ExhaustedError{Sandbox: sb, What: what, cause: err}
}
