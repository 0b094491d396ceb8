// Package problem says what an error means to a client: a code and a sentence for a person.
// Transports render it in their own terms — REST as an HTTP status and a JSON body, MCP as a
// tool error — and never classify domain errors themselves. The table is spread over the
// domain: each domain error is declared as a Carrier of its own code and sentence (a
// *Sentinel, or a type of its own), so this package imports none of hangar's.
package problem

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
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

// statuses is each code's one HTTP status, for the transports that answer over HTTP (REST, the
// E2B-compatible API).
var statuses = map[Code]int{
	CodeBadRequest:   400,
	CodeUnauthorized: 401,
	CodeForbidden:    403,
	CodeNotFound:     404,
	CodeMethod:       405,
	CodeConflict:     409,
	CodeTooLarge:     413,
	CodeTimeout:      408,
	CodeLimit:        429,
	CodeUnavailable:  503,
	CodeInternal:     500,
}

// Status is the code's HTTP status (500 for a code it does not know).
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return 500
}

// ErrBodyTimeout is a request body that did not arrive within its deadline (HANGAR_BODY_TIMEOUT,
// plus what HANGAR_BODY_MIN_BYTES_PER_SECOND allows for its size): the client is too slow, or
// holds the connection on purpose.
var ErrBodyTimeout error = &Sentinel{Text: "the request body did not arrive in time", Code: CodeTimeout, Outranks: true,
	Message: "The request body did not arrive in time; send it at once, at a fair rate (HANGAR_BODY_TIMEOUT, HANGAR_BODY_MIN_BYTES_PER_SECOND)."}

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

// ExhaustedRetryAfter is the Retry-After of a daemon out of a resource: descriptors and
// processes free as the sandbox's commands end, which hangar cannot foresee, so it is a hint.
const ExhaustedRetryAfter = 5 * time.Second

// A Carrier is an error that says what it means to a client. Domain errors are declared as
// Carriers (a *Sentinel, or a type of their own), so the table of what each means is read
// where each is declared, and this package knows none of them.
type Carrier interface {
	// Problem is what the error means when it reached the transport as err (itself, wrapped):
	// err gives the detail and the sentences that quote it. nil: nothing to say there, Of
	// looks further.
	Problem(err error) *Problem
}

// A Sentinel is a domain error declared with what it means to a client.
type Sentinel struct {
	Text string // its Error(): what the domain and the log say
	Code Code
	// Message is the sentence a client sees; "": the error as it reached the transport, as a
	// sentence (for errors that are always wrapped with what a person needs to know).
	Message string
	// RetryAfter is a hint for when to try again; 0: none.
	RetryAfter time.Duration
	// Quiet keeps the error as it reached the transport out of the problem's detail: it names
	// what is not the client's to know (an address inside the deployment), or adds nothing.
	Quiet bool
	// Outranks makes it what a client is told whatever else the error wraps: what hangar itself
	// lacks (its database, its disk, a body in time) is what is missing, whatever was asked.
	Outranks bool
}

func (s *Sentinel) Error() string { return s.Text }

// Problem is the Sentinel's code and sentence, with err as the detail unless it is Quiet.
func (s *Sentinel) Problem(err error) *Problem {
	p := &Problem{Code: s.Code, Message: s.Message, RetryAfter: s.RetryAfter}
	if p.Message == "" {
		p.Message = Sentence(err.Error())
	}
	if !s.Quiet {
		p.Detail = err.Error()
	}
	return p
}

// TerminalError is Err from an operation on the terminal ID (MCP's terminal tools): the errors
// that have a terminal's words for it (process's) say them.
type TerminalError struct {
	ID  string
	Err error
}

func (e *TerminalError) Error() string { return "terminal " + e.ID + ": " + e.Err.Error() }

// Unwrap gives Err.
func (e *TerminalError) Unwrap() error { return e.Err }

// Of is what err means to a client. A *Problem is itself; else the first Carrier in err's tree
// that has something to say, looking at an error before what it wraps, and at the last of
// several first: in "%w: %w" the first is the kind, the second the cause that says more
// (store.ErrUnavailable, then store.ErrBusy). Errors no Carrier speaks for are hangar's own
// failures: CodeInternal with a general sentence, and the cause as the detail, which a
// transport logs and does not send.
func Of(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return New(CodeTooLarge, "The request body is too large.", err)
	}
	if p := carried(err, err, true); p != nil {
		return p
	}
	if p := carried(err, err, false); p != nil {
		return p
	}
	return New(CodeInternal, "Something went wrong inside hangar; the server log has the details.", err)
}

// carried is what the first Carrier in e's tree says of err, in Of's order; with outranking,
// only a Sentinel that Outranks the others is asked.
func carried(err, e error, outranking bool) *Problem {
	if c, ok := e.(Carrier); ok {
		if s, ok := c.(*Sentinel); !outranking || ok && s.Outranks {
			if p := c.Problem(err); p != nil {
				return p
			}
		}
	}
	switch e := e.(type) {
	case interface{ Unwrap() error }:
		if next := e.Unwrap(); next != nil {
			return carried(err, next, outranking)
		}
	case interface{ Unwrap() []error }:
		next := e.Unwrap()
		for i := len(next) - 1; i >= 0; i-- {
			if p := carried(err, next[i], outranking); p != nil {
				return p
			}
		}
	}
	return nil
}

// Sentence starts s with a capital and ends it with a full stop.
func Sentence(s string) string {
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
