package mcp

import (
	"errors"
	"log/slog"

	"github.com/hangar-dev/hangar/internal/problem"
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

// classify is err as a tool error: the problem table's sentence, with its detail when it adds
// something. Hangar's own failures get a general sentence; the log gets the cause.
func classify(log *slog.Logger, op string, err error) error {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	p := problem.Of(err)
	if p.Code == problem.CodeInternal {
		log.Error("mcp tool failed", "op", op, "err", err)
		return errorf(p.Message)
	}
	if p.Code == problem.CodeUnavailable && p.Detail == "" {
		log.Warn("mcp tool refused: a part hangar needs does not answer", "op", op, "err", err)
	}
	return &toolError{message: p.Message, detail: p.Detail}
}
