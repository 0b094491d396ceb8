package problem_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/fleet"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOf: each domain error, however wrapped, has its one code, and a sentence that says what
// it needs to (a limit names its setting; a dead sandbox names the part, not its address).
func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		code       problem.Code
		says       string
		retryAfter bool
		noDetail   bool
	}{
		{err: &http.MaxBytesError{Limit: 10}, code: problem.CodeTooLarge, says: "too large"},
		{err: auth.ErrRevoked, code: problem.CodeUnauthorized, says: "revoked"},
		{err: auth.ErrForbidden, code: problem.CodeForbidden, says: "not allowed"},
		{err: &stream.LimitError{Setting: "HANGAR_STREAM_MAX_PER_TOKEN", Max: 16, RetryAfter: 5 * time.Second}, code: problem.CodeLimit, says: "HANGAR_STREAM_MAX_PER_TOKEN", retryAfter: true},
		{err: &stream.LimitError{Setting: "HANGAR_STREAM_MAX_TOTAL", Max: 512, RetryAfter: 5 * time.Second}, code: problem.CodeLimit, says: "HANGAR_STREAM_MAX_TOTAL", retryAfter: true},
		{err: stream.ErrShuttingDown, code: problem.CodeUnavailable, says: "shutting down"},
		{err: &process.LimitError{Max: 4}, code: problem.CodeLimit, says: "HANGAR_BACKGROUND_MAX_PER_TOKEN", retryAfter: true},
		{err: process.ErrNotFound, code: problem.CodeNotFound, says: "no such process"},
		{err: process.ErrExited, code: problem.CodeConflict, says: "exited"},
		{err: sandbox.ErrNotFound, code: problem.CodeNotFound, says: "no such sandbox"},
		{err: sandbox.ErrConflict, code: problem.CodeConflict, says: "taken"},
		{err: sandbox.ErrState, code: problem.CodeConflict, says: "state"},
		{err: sandbox.ErrUnavailable, code: problem.CodeUnavailable, says: "does not answer"},
		{err: fmt.Errorf("%w: %w", store.ErrUnavailable, store.ErrBusy), code: problem.CodeUnavailable, says: "busy", retryAfter: true},
		{err: store.ErrUnavailable, code: problem.CodeUnavailable, says: "does not answer", retryAfter: true},
		{err: fmt.Errorf("create: %w", fmt.Errorf("image foo:1 is not pulled; run docker pull foo:1: %w", provider.ErrImageMissing)),
			code: problem.CodeBadRequest, says: "Image foo:1 is not pulled; run docker pull foo:1."},
		{err: fmt.Errorf("create: %w: %w", sandbox.ErrInvalid, fmt.Errorf("image foo:1 is not pulled: %w", provider.ErrImageMissing)),
			code: problem.CodeBadRequest, says: "Image foo:1 is not pulled."},
		{err: fmt.Errorf("%w: sandbox box failed: its daemon is not running", sandbox.ErrState),
			code: problem.CodeConflict, says: "Sandbox box failed: its daemon is not running."},
		{err: &auth.TokenLimitError{User: "ann", Max: 3}, code: problem.CodeConflict, says: "Op: user ann already holds 3", noDetail: true},
		{err: fmt.Errorf("%w: %q is not in your inbox", fleet.ErrNoSuchItem, "i_1"), code: problem.CodeNotFound, says: `Op: no such item in the inbox: "i_1" is not in your inbox.`},
		{err: &sandbox.DiedError{Sandbox: "box", Part: sandbox.PartDaemon, State: "failed", Reason: "gone"},
			code: problem.CodeUnavailable, says: "daemon of sandbox box", noDetail: true},
		{err: errors.New("disk on fire"), code: problem.CodeInternal, says: "inside hangar"},
	} {
		p := problem.Of(fmt.Errorf("op: %w", tc.err))
		if p.Code != tc.code || !strings.Contains(p.Message, tc.says) {
			t.Errorf("%v: %s %q, want %s saying %q", tc.err, p.Code, p.Message, tc.code, tc.says)
		}
		if (p.RetryAfter > 0) != tc.retryAfter {
			t.Errorf("%v: Retry-After %v, want one: %v", tc.err, p.RetryAfter, tc.retryAfter)
		}
		if tc.noDetail && p.Detail != "" {
			t.Errorf("%v: detail %q, want none", tc.err, p.Detail)
		}
	}
}

// TestOfProblem: a problem a transport made itself is passed on as it is.
func TestOfProblem(t *testing.T) {
	t.Parallel()
	want := problem.New(problem.CodeBadRequest, "timeout must be a number of seconds.", errors.New("-1"))
	if got := problem.Of(fmt.Errorf("decode: %w", want)); got != want {
		t.Errorf("Of = %+v, want %+v", got, want)
	}
}

// TestOfTerminal: a terminal tool's failure is said in a terminal's words, with its id and no
// detail; a terminal's other failures are the table's as for any process.
func TestOfTerminal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code problem.Code
		says string
	}{
		{process.ErrNotFound, problem.CodeNotFound, "There is no terminal p_1 of this token (it was closed more than 10 minutes ago, or never was)."},
		{process.ErrExited, problem.CodeConflict, "The terminal p_1 has exited: terminal_read shows how, terminal_open starts another."},
		{sandbox.ErrUnavailable, problem.CodeUnavailable, "The sandbox's provider or daemon does not answer."},
	} {
		p := problem.Of(&problem.TerminalError{ID: "p_1", Err: fmt.Errorf("read: %w", tc.err)})
		if p.Code != tc.code || p.Message != tc.says {
			t.Errorf("%v: %s %q, want %s %q", tc.err, p.Code, p.Message, tc.code, tc.says)
		}
		if tc.code != problem.CodeUnavailable && p.Detail != "" {
			t.Errorf("%v: detail %q, want none", tc.err, p.Detail)
		}
	}
}

// carrier is a Carrier wrapping next, as a domain error type is.
type carrier struct {
	says string // "": nothing to say
	next error
}

func (c *carrier) Error() string { return "carrier " + c.says }
func (c *carrier) Unwrap() error { return c.next }
func (c *carrier) Problem(error) *problem.Problem {
	if c.says == "" {
		return nil
	}
	return &problem.Problem{Code: problem.CodeConflict, Message: c.says}
}

// TestOfOrder: of several errors that say what they mean, an error speaks before what it
// wraps, and in "%w: %w" the second (the cause) before the first (the kind); an error with
// nothing to say leaves it to what it wraps.
func TestOfOrder(t *testing.T) {
	t.Parallel()
	kind := &problem.Sentinel{Text: "unavailable", Code: problem.CodeUnavailable, Message: "Kind."}
	cause := &problem.Sentinel{Text: "busy", Code: problem.CodeLimit, Message: "Cause."}
	lacks := &problem.Sentinel{Text: "no database", Code: problem.CodeUnavailable, Message: "Lacks.", Outranks: true}
	for _, tc := range []struct {
		err  error
		says string
	}{
		{fmt.Errorf("%w: %w", kind, cause), "Cause."},
		{fmt.Errorf("%w: %w: %w", kind, cause, errors.New("driver")), "Cause."},
		{fmt.Errorf("op: %w: %w", kind, errors.New("driver")), "Kind."},
		{&carrier{says: "Outer.", next: cause}, "Outer."},
		{fmt.Errorf("op: %w", &carrier{next: fmt.Errorf("inner: %w", cause)}), "Cause."},
		{&carrier{next: errors.New("plain")}, "Something went wrong inside hangar; the server log has the details."},
		// What hangar itself lacks outranks what wraps it, wherever it is.
		{&carrier{says: "Outer.", next: fmt.Errorf("%w: %w", lacks, cause)}, "Lacks."},
		{errors.Join(lacks, cause), "Lacks."},
	} {
		if p := problem.Of(tc.err); p.Message != tc.says {
			t.Errorf("%v: says %q, want %q", tc.err, p.Message, tc.says)
		}
	}
}

// TestSentinel: a Sentinel's detail is the error as it reached the transport unless it is
// Quiet, and without a Message its sentence is that error's.
func TestSentinel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s             *problem.Sentinel
		message, want string // want: the detail
	}{
		{&problem.Sentinel{Text: "gone", Code: problem.CodeNotFound, Message: "Gone."}, "Gone.", "op: gone: x"},
		{&problem.Sentinel{Text: "gone", Code: problem.CodeNotFound, Message: "Gone.", Quiet: true}, "Gone.", ""},
		{&problem.Sentinel{Text: "gone", Code: problem.CodeNotFound}, "Op: gone: x.", "op: gone: x"},
	} {
		p := problem.Of(fmt.Errorf("op: %w: x", tc.s))
		if p.Code != tc.s.Code || p.Message != tc.message || p.Detail != tc.want {
			t.Errorf("%+v: %+v, want message %q detail %q", tc.s, p, tc.message, tc.want)
		}
	}
}
