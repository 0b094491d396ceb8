package mcp

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Which failures are which, following MCP's convention:
//
//   - Protocol errors (JSON-RPC errors) are the SDK's: an unknown method or tool, a malformed
//     request, a missing or bad token (HTTP 401 before any JSON-RPC).
//   - Everything a tool call can get wrong or run into is a tool error, an IsError result whose
//     text is a sentence for a person (and for the model, which can act on it): arguments that
//     do not fit the tool's schema or make no sense (an empty command, a negative timeout), an
//     unknown or paused sandbox, a stream refused by a limit (the text names the setting), a
//     shutdown, a provider or daemon that does not answer, and hangar's own failures.

// toolError is a tool-level failure: its text is what the caller sees.
type toolError struct {
	message string // a sentence for a person
	detail  string // the technical cause, when it adds something
}

func (e *toolError) Error() string {
	if e.detail == "" {
		return e.message
	}
	return e.message + " (" + e.detail + ")"
}

// errorf makes a tool error from a sentence.
func errorf(message string) error { return &toolError{message: message} }

// classify maps an error from the domain packages to a tool error. Errors it does not know are
// hangar's: the caller gets a generic sentence, the log gets the cause.
func classify(log *slog.Logger, op string, err error) error {
	var te *toolError
	var limit *stream.LimitError
	var bgLimit *process.LimitError
	var died *sandbox.DiedError
	msg := ""
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &limit):
		return &toolError{message: limit.Error() + "."} // the message names the setting
	case errors.As(err, &bgLimit):
		return &toolError{message: fmt.Sprintf("This token already has %d background processes running, the most it may (HANGAR_BACKGROUND_MAX_PER_TOKEN); kill one first.", bgLimit.Max)}
	case errors.Is(err, process.ErrNotFound):
		msg = "There is no such process in that sandbox, or it was not started by this token."
	case errors.Is(err, process.ErrExited):
		msg = "The process has exited, so it takes no more input."
	case errors.Is(err, process.ErrNeedsDaemon):
		msg = "This needs the sandbox's daemon, which it does not have."
	case errors.Is(err, process.ErrInvalid):
		msg = "The process request is not valid."
	case errors.Is(err, stream.ErrShuttingDown):
		msg = "hangar is shutting down; try again in a moment."
	case errors.Is(err, sandbox.ErrNotFound):
		msg = "There is no such sandbox, or this token may not use it."
	case errors.Is(err, sandbox.ErrInvalid):
		msg = "The request is not valid."
	case errors.Is(err, sandbox.ErrForbidden):
		msg = "This token is not allowed to do that."
	case errors.Is(err, sandbox.ErrState):
		msg = "The sandbox is not in a state that allows this."
	case errors.As(err, &died):
		return &toolError{message: died.Message()} // the cause (an address) stays in the log
	case errors.Is(err, sandbox.ErrUnavailable):
		msg = "The sandbox's provider or daemon does not answer."
	default:
		log.Error("mcp tool failed", "op", op, "err", err)
		return errorf("Something went wrong inside hangar; the server log has the details.")
	}
	return &toolError{message: msg, detail: err.Error()}
}
