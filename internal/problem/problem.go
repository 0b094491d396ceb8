// Package problem is hangar's one table of what a domain error means to a client: a code and a
// sentence for a person. Transports render it in their own terms — REST as an HTTP status and a
// JSON body, MCP as a tool error — and never classify domain errors themselves.
package problem

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/fleet"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
)

// Code is the machine-readable kind of a problem (REST's error.code).
type Code string

// The codes. Each transport maps each to one form of its own (REST: one HTTP status).
const (
	CodeBadRequest   Code = "bad_request"
	CodeUnauthorized Code = "unauthorized"
	CodeForbidden    Code = "forbidden"
	CodeNotFound     Code = "not_found"
	CodeMethod       Code = "method_not_allowed"
	CodeConflict     Code = "conflict"
	CodeTooLarge     Code = "too_large"
	CodeTimeout      Code = "timeout"
	CodeLimit        Code = "limit"
	CodeUnavailable  Code = "unavailable"
	CodeInternal     Code = "internal"
)

// ErrBodyTimeout is a request body that did not arrive within its deadline (HANGAR_BODY_TIMEOUT,
// plus what HANGAR_BODY_MIN_BYTES_PER_SECOND allows for its size): the client is too slow, or
// holds the connection on purpose.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// Problem is an error on its way to a client: a code, a sentence for a person, and the
// technical cause.
type Problem struct {
	Code    Code
	Message string // a sentence for a person
	Detail  string // the technical cause; "" when it adds nothing or must stay in the log
	// RetryAfter is a hint for when to try again (limits); 0: none.
	RetryAfter time.Duration
}

func (p *Problem) Error() string {
	if p.Detail == "" {
		return p.Message
	}
	return p.Message + ": " + p.Detail
}

// New is a problem a transport finds itself (a malformed request); cause, when set, is its
// detail.
func New(code Code, message string, cause error) *Problem {
	p := &Problem{Code: code, Message: message}
	if cause != nil {
		p.Detail = cause.Error()
	}
	return p
}

// StoreRetryAfter is the Retry-After of a request the store did not answer: a database that
// restarts or a pool that frees a connection takes seconds, so a client should not hammer it.
const StoreRetryAfter = 5 * time.Second

// StoreBusyRetryAfter is the Retry-After of a request that found every connection to the
// database in use: a burst passes in about a second, and a sooner retry joins the queue again.
const StoreBusyRetryAfter = 2 * time.Second

// StoreFullRetryAfter is the Retry-After of a request the store could not write for a full
// disk: a person has to free space, which takes longer than a restart.
const StoreFullRetryAfter = 60 * time.Second

// BackgroundRetryAfter is the Retry-After of a refused background process: a place frees only
// when one of the token's processes ends, which hangar cannot foresee, so it is a polling hint.
const BackgroundRetryAfter = 10 * time.Second

// entry is one row of the table: the errors it matches, and what they mean.
type entry struct {
	match   func(error) bool
	code    Code
	message string
	// say, when set, makes the problem from the error itself (a sentence that names a limit,
	// a dead part of a sandbox); message is then unused.
	say func(err error) *Problem
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error]() func(error) bool {
	return func(err error) bool { var t T; return errors.As(err, &t) }
}

// table is read in order: the first match wins, so a more specific error comes first.
var table = []entry{
	{match: as[*http.MaxBytesError](), code: CodeTooLarge, message: "The request body is too large."},
	{match: is(ErrBodyTimeout), code: CodeTimeout, message: "The request body did not arrive in time; send it at once, at a fair rate (HANGAR_BODY_TIMEOUT, HANGAR_BODY_MIN_BYTES_PER_SECOND)."},
	// What hangar's own store lacks comes first: whatever was asked, that is what is missing.
	// The cause (which names the database's address) stays in the server's log.
	{match: is(store.ErrFull), say: func(err error) *Problem {
		return &Problem{Code: CodeUnavailable, Message: "hangar's disk is full: its database cannot write; free space where its data is kept, then try again.", RetryAfter: StoreFullRetryAfter}
	}},
	{match: is(store.ErrBusy), say: func(err error) *Problem {
		return &Problem{Code: CodeUnavailable, Message: "hangar's database is busy: every connection to it is in use; try again in a moment.", RetryAfter: StoreBusyRetryAfter}
	}},
	{match: is(store.ErrUnavailable), say: func(err error) *Problem {
		return &Problem{Code: CodeUnavailable, Message: "hangar's database does not answer; try again in a moment.", RetryAfter: StoreRetryAfter}
	}},
	{match: is(auth.ErrNoToken), code: CodeUnauthorized, message: "This request needs a token: send 'Authorization: Bearer <token>'."},
	{match: is(auth.ErrUnknownToken), code: CodeUnauthorized, message: "The token is not one hangar knows."},
	{match: is(auth.ErrRevoked), code: CodeUnauthorized, message: "The token was revoked."},
	{match: is(auth.ErrExpired), code: CodeUnauthorized, message: "The token has expired."},
	{match: is(auth.ErrAudience), code: CodeUnauthorized, message: "The token was issued for another resource: an OAuth access token is good only at the /mcp it was issued for."},
	{match: is(auth.ErrForbidden), code: CodeForbidden, message: "The token is not allowed to do that."},
	{match: is(auth.ErrInvalid), code: CodeBadRequest, message: "The token request is not valid."},
	{match: is(auth.ErrNotFound), code: CodeNotFound, message: "There is no such token."},
	{match: is(auth.ErrNoSandbox), code: CodeNotFound, message: "There is no such sandbox, or it is not yours."},
	// A user at its bound of live tokens: 409, not 429, since waiting frees nothing (revoking does).
	{match: as[*auth.TokenLimitError](), say: func(err error) *Problem { return New(CodeConflict, sentence(err.Error()), nil) }},
	{match: is(auth.ErrStatic), code: CodeConflict, message: "That token comes from the tokens file and can only be changed there."},
	{match: is(oauth.ErrNoGrant), code: CodeNotFound, message: "There is no such OAuth grant, or it is not yours."},
	{match: as[*stream.LimitError](), say: streamLimit},
	{match: is(stream.ErrShuttingDown), code: CodeUnavailable, message: "hangar is shutting down; try again in a moment."},
	{match: as[*process.LimitError](), say: backgroundLimit},
	{match: terminal(process.ErrNotFound), say: func(err error) *Problem {
		return &Problem{Code: CodeNotFound, Message: fmt.Sprintf("There is no terminal %s of this token (it was closed more than 10 minutes ago, or never was).", terminalID(err))}
	}},
	{match: terminal(process.ErrExited), say: func(err error) *Problem {
		return &Problem{Code: CodeConflict, Message: fmt.Sprintf("The terminal %s has exited: terminal_read shows how, terminal_open starts another.", terminalID(err))}
	}},
	{match: is(process.ErrNotFound), code: CodeNotFound, message: "There is no such process in that sandbox, or it was not started by this token."},
	{match: is(process.ErrExited), code: CodeConflict, message: "The process has exited."},
	{match: is(process.ErrNeedsDaemon), code: CodeConflict, message: "This needs the sandbox's daemon, which it does not have."},
	{match: is(process.ErrInvalid), code: CodeBadRequest, message: "The process request is not valid."},
	{match: as[*process.ElsewhereError](), say: func(err error) *Problem {
		// Where the other replica is reached stays in the log: it is an address inside the
		// deployment, not the client's to know.
		var e *process.ElsewhereError
		errors.As(err, &e)
		return &Problem{Code: CodeUnavailable, Message: fmt.Sprintf("The processes of sandbox %s are followed by another hangar replica just now; try again in a moment.", e.Sandbox),
			RetryAfter: time.Second}
	}},
	{match: is(turns.ErrNotFound), code: CodeNotFound, message: "There is no such session, turn or job, or it is not yours."},
	{match: is(turns.ErrConflict), code: CodeConflict, message: "That conflicts with the session's state: a turn is running, or the name is taken."},
	{match: is(turns.ErrInvalid), code: CodeBadRequest, message: "The request is not valid."},
	{match: is(fleet.ErrTicket), code: CodeUnauthorized, message: "The ticket is not valid: it is unknown, used already or expired; ask for a new one (POST /api/fleet/tickets)."},
	{match: is(fleet.ErrTooManyTickets), say: func(err error) *Problem {
		return &Problem{Code: CodeLimit, Message: sentence(err.Error()), RetryAfter: 10 * time.Second}
	}},
	{match: is(fleet.ErrForbidden), code: CodeForbidden, message: "This token may not see that fleet."},
	{match: is(fleet.ErrInvalid), code: CodeBadRequest, message: "The fleet request is not valid."},
	{match: is(fleet.ErrNoSuchItem), say: func(err error) *Problem { return New(CodeNotFound, sentence(err.Error()), err) }},
	{match: is(watch.ErrInvalid), code: CodeBadRequest, message: "The watch request is not valid."},
	{match: is(watch.ErrNeedsDaemon), code: CodeConflict, message: "Watching a directory needs the sandbox's daemon, which it does not have."},
	{match: is(watch.ErrDaemonLimit), code: CodeLimit, message: "The sandbox's daemon watches as many directories as it allows; end a watch first."},
	{match: is(sandbox.ErrNotFound), code: CodeNotFound, message: "There is no such sandbox, or this token may not use it."},
	{match: is(sandbox.ErrConflict), code: CodeConflict, message: "That sandbox name is taken."},
	{match: is(provider.ErrImageMissing), say: func(err error) *Problem { return New(CodeBadRequest, imageMissing(err), err) }},
	{match: is(sandbox.ErrInvalid), code: CodeBadRequest, message: "The request is not valid."},
	{match: is(sandbox.ErrForbidden), code: CodeForbidden, message: "The token is not allowed to do that."},
	{match: is(sandbox.ErrState), say: sandboxState},
	{match: as[*sandbox.DiedError](), say: died},
	{match: as[*sandbox.ExhaustedError](), say: exhausted},
	{match: is(sandbox.ErrUnavailable), code: CodeUnavailable, message: "The sandbox's provider or daemon does not answer."},
}

// TerminalError is Err from an operation on the terminal ID (MCP's terminal tools): the table
// says what it means in a terminal's words.
type TerminalError struct {
	ID  string
	Err error
}

func (e *TerminalError) Error() string { return "terminal " + e.ID + ": " + e.Err.Error() }

// Unwrap gives Err.
func (e *TerminalError) Unwrap() error { return e.Err }

// terminal matches target on a terminal.
func terminal(target error) func(error) bool {
	return func(err error) bool { var t *TerminalError; return errors.As(err, &t) && errors.Is(err, target) }
}

func terminalID(err error) string {
	var t *TerminalError
	errors.As(err, &t)
	return t.ID
}

// Of is what err means to a client. A *Problem is itself. Errors the table does not know are
// hangar's own failures: CodeInternal with a general sentence, and the cause as the detail,
// which a transport logs and does not send.
func Of(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	for _, e := range table {
		if !e.match(err) {
			continue
		}
		if e.say != nil {
			return e.say(err)
		}
		return New(e.code, e.message, err)
	}
	return New(CodeInternal, "Something went wrong inside hangar; the server log has the details.", err)
}

// sandboxState says which state refused the request, and why the sandbox is in it when it
// failed ("Sandbox box failed: its daemon is not running."), where the error says so.
func sandboxState(err error) *Problem {
	msg := "The sandbox is not in a state that allows this."
	if _, what, ok := strings.Cut(err.Error(), sandbox.ErrState.Error()+": "); ok && what != "" {
		msg = sentence(what)
	}
	return New(CodeConflict, msg, err)
}

// streamLimit names the limit that refused a stream, in its own sentence.
func streamLimit(err error) *Problem {
	var le *stream.LimitError
	errors.As(err, &le)
	return &Problem{Code: CodeLimit, Message: sentence(le.Error()), RetryAfter: le.RetryAfter}
}

func backgroundLimit(err error) *Problem {
	var le *process.LimitError
	errors.As(err, &le)
	return &Problem{Code: CodeLimit, Message: sentence(le.Error()), RetryAfter: BackgroundRetryAfter}
}

// died says which part of a sandbox died; the cause (an address) stays in the log.
func died(err error) *Problem {
	var d *sandbox.DiedError
	errors.As(err, &d)
	return &Problem{Code: CodeUnavailable, Message: d.Message()}
}

// ExhaustedRetryAfter is the Retry-After of a daemon out of a resource: descriptors and
// processes free as the sandbox's commands end, which hangar cannot foresee, so it is a hint.
const ExhaustedRetryAfter = 5 * time.Second

// exhausted says what the sandbox's daemon is out of; the daemon's own words are the detail.
func exhausted(err error) *Problem {
	var e *sandbox.ExhaustedError
	errors.As(err, &e)
	return &Problem{Code: CodeUnavailable, Message: e.Message(), Detail: errors.Unwrap(e).Error(), RetryAfter: ExhaustedRetryAfter}
}

// sentence starts s with a capital and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return strings.TrimSuffix(string(r), ".") + "."
}

// Bytes says n bytes the way a limit is written: "1 MiB", "64 KiB", "1000 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
