package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// Errors a caller can test for with errors.Is. Every error the client returns for a daemon's
// answer is an *Error that matches one of them.
var (
	// ErrNotFound: no such process (pid or tag), file, directory or watcher.
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated: the access token is missing or wrong, or the user is unknown.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the daemon refused (a user it cannot act as, a file it cannot touch).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnavailable: the daemon cannot be reached, or is shutting down.
	ErrUnavailable = errors.New("daemon unavailable")
	// ErrInvalidArgument: the request is wrong (a missing working directory, an unknown
	// program, a bad signal).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the process cannot do that now (stdin on a pty process, stdin
	// closed, resizing a process without a pty).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrAlreadyExists: the directory to make exists already.
	ErrAlreadyExists = errors.New("already exists")
	// ErrSlowSubscriber: the daemon ended the stream because this client fell behind its
	// output (hangar's daemon; the process itself is unaffected). A stream's ResourceExhausted.
	ErrSlowSubscriber = errors.New("slow subscriber")
	// ErrExhausted: the daemon is out of a resource it needs to do this — file descriptors,
	// processes, memory, disk — and may do it later (Exhausted says which). A call's
	// ResourceExhausted.
	ErrExhausted = errors.New("the daemon is out of a resource")
	// ErrDeadlineExceeded: the daemon ended the stream at its deadline. E2B's envd ends a
	// Start stream this way when the process's lifetime passes (hangar's sends the end event).
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrNoEnd: a process stream ended without an end event.
	ErrNoEnd = errors.New("the stream ended before the process did")
	// ErrDaemon: any other error answered by the daemon.
	ErrDaemon = errors.New("daemon error")
)

// Error is an error from the daemon, or from reaching it.
type Error struct {
	// Op is what the client was doing, e.g. "start process".
	Op string
	// Code is the Connect code of the answer (for /files and /health, mapped from the HTTP
	// status).
	Code connect.Code
	// Message is the daemon's explanation, for a person.
	Message string

	kind  error // one of the sentinels above
	cause error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Op, e.kind, e.Message)
}

// Unwrap gives the sentinel and the underlying error.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

var codeKinds = map[connect.Code]error{
	connect.CodeNotFound:           ErrNotFound,
	connect.CodeUnauthenticated:    ErrUnauthenticated,
	connect.CodePermissionDenied:   ErrPermissionDenied,
	connect.CodeUnavailable:        ErrUnavailable,
	connect.CodeInvalidArgument:    ErrInvalidArgument,
	connect.CodeFailedPrecondition: ErrFailedPrecondition,
	connect.CodeAlreadyExists:      ErrAlreadyExists,
	connect.CodeResourceExhausted:  ErrExhausted,
	connect.CodeDeadlineExceeded:   ErrDeadlineExceeded,
}

// wrapErr turns err from a call made with ctx into an *Error, or into ctx's own error when the
// caller cancelled.
func wrapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", op, ctxErr)
	}
	code := connect.CodeOf(err)
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	kind, ok := codeKinds[code]
	if !ok || (code == connect.CodeResourceExhausted && !connect.IsWireError(err)) {
		// connect-go's own ResourceExhausted (a message past a size it reads) says nothing of
		// what the daemon is out of.
		kind = ErrDaemon
	}
	if kind == ErrUnavailable && strings.HasPrefix(msg, exhaustedPrefix) {
		// The daemon could not take the connection for want of a descriptor (it answers
		// those 503): it is there, and out of something.
		kind = ErrExhausted
	}
	return &Error{Op: op, Code: code, Message: msg, kind: kind, cause: err}
}

// wrapStreamErr is wrapErr for an error that ends a stream after it opened: there, the daemon's
// ResourceExhausted says this client fell behind (ErrSlowSubscriber).
func wrapStreamErr(ctx context.Context, op string, err error) error {
	err = wrapErr(ctx, op, err)
	if e, ok := err.(*Error); ok && e.kind == ErrExhausted {
		e.kind = ErrSlowSubscriber
	}
	return err
}

// exhaustedPrefix starts the message of hangar's daemon when it is out of a resource (see
// daemon.startError): "the daemon is out of file descriptors: ...".
const exhaustedPrefix = "the daemon is out of "

// Exhausted says what the daemon is out of, when err is ErrExhausted: "file descriptors",
// "processes", "memory" or "disk space" as hangar's daemon names it, else "a resource it
// needs" (E2B's envd does not say).
func Exhausted(err error) (what string, ok bool) {
	var e *Error
	if !errors.Is(err, ErrExhausted) || !errors.As(err, &e) {
		return "", false
	}
	if rest, found := strings.CutPrefix(e.Message, exhaustedPrefix); found {
		if what, _, found := strings.Cut(rest, ":"); found && what != "" {
			return what, true
		}
	}
	return "a resource it needs", true
}

// httpCodes maps the HTTP statuses of /files and /health to Connect codes.
var httpCodes = map[int]connect.Code{
	http.StatusBadRequest:          connect.CodeInvalidArgument,
	http.StatusUnauthorized:        connect.CodeUnauthenticated,
	http.StatusForbidden:           connect.CodePermissionDenied,
	http.StatusNotFound:            connect.CodeNotFound,
	http.StatusBadGateway:          connect.CodeUnavailable,
	http.StatusServiceUnavailable:  connect.CodeUnavailable,
	http.StatusGatewayTimeout:      connect.CodeUnavailable,
	http.StatusInsufficientStorage: connect.CodeResourceExhausted,
}

// httpError is the *Error for an HTTP answer with status and the daemon's message.
func httpError(op string, status int, message string) error {
	code, ok := httpCodes[status]
	if !ok {
		code = connect.CodeUnknown
	}
	kind, ok := codeKinds[code]
	if !ok || code == connect.CodeResourceExhausted {
		kind = ErrDaemon
	}
	if message == "" {
		message = http.StatusText(status)
	}
	return &Error{Op: op, Code: code, Message: fmt.Sprintf("%s (HTTP %d)", message, status), kind: kind}
}
