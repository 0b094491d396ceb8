package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// ErrClientGone is what a streamed exec's Run returns when its client went away or stopped
// reading: the command was killed, and nobody is left to tell.
var ErrClientGone = errors.New("the stream's client is gone; the command was killed")

// errNoStreams refuses a streamed exec on a Manager made without Config.Streams.
var errNoStreams = errors.New("streamed exec: the sandbox manager has no stream registry")

// killCauses say, in the killed command's status ("killed: ..."), why a stream's end killed it.
var killCauses = map[stream.Reason]error{
	stream.ReasonClient:  errors.New("the stream's client is gone"),
	stream.ReasonSlow:    errors.New("the stream's client stopped reading"),
	stream.ReasonRevoked: errors.New("the stream's token was revoked or expired"),
}

// detaches says which endings let the command run on (spec: shutdown, a destroyed or paused
// sandbox); a client that went, stopped reading or lost its token kills it.
var detaches = map[stream.Reason]bool{stream.ReasonShutdown: true, stream.ReasonDestroyed: true, stream.ReasonPaused: true}

// StreamedExec is one command whose output goes to a client as it prints. Its Stream carries
// items "stdout" and "stderr" (Data: the bytes, whole characters where the output is text) and
// at most one stream.EventCapped. StreamExec admits it; Run runs it, once.
type StreamedExec struct {
	Stream *stream.Stream

	m   *Manager
	sb  store.Sandbox
	req ExecRequest
}

// ExecOutcome is how a streamed exec ended, for its client.
type ExecOutcome struct {
	// Result is what the command printed (its last bytes) and, when Ended, how it exited.
	Result ExecResult
	// Ended says the command ended by itself, so Result.ExitCode is its own (not killed by
	// the stream's end, not let go to run on).
	Ended bool
	// Closed is why the stream ended before the command's output did, or "" when it ran to the
	// end. A stream ended early reports what the command printed until then, whatever became
	// of the command (killed, let go, or cut off with its sandbox).
	Closed stream.Reason
	// Capped says the stream reached its byte cap (HANGAR_STREAM_MAX_BYTES).
	Capped bool
}

// StreamExec admits a streamed exec (the registry's limits apply to p) of a command in the
// sandbox ref and returns it, not yet started: Run starts it. A refusal (a limit, a sandbox
// that does not run, a bad request) is the error, before anything was sent to the client.
func (m *Manager) StreamExec(ctx context.Context, p auth.Principal, ref string, req ExecRequest) (*StreamedExec, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	if m.cfg.Streams == nil {
		return nil, errNoStreams
	}
	sb, err := m.Runnable(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	st, err := m.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindExec, Principal: p, Sandbox: sb.Name})
	if err != nil {
		return nil, err
	}
	return &StreamedExec{Stream: st, m: m, sb: sb, req: req}, nil
}

// Run starts the command (through the sandbox's daemon, else the provider's exec) and
// renders its output with write as it prints, on the caller's goroutine: the daemon's stream
// is read by the goroutine that writes to the client (stream.Produce), and a streamed exec at
// rest holds no goroutine of its own. A command printing faster than the stream's pace waits
// for it, as for a slow terminal; write(nil) is a keep-alive after idle with nothing written.
//
// begin (when not nil) is called once the command started, before any output: it sends the
// client's headers, and its failure ends the stream as a client gone. A command that does not
// start (a daemon out of descriptors, a cwd that is not there) is Run's error, begin not
// called, so that it gets a status of its own rather than an event in a stream answered 200.
//
// How the stream ends decides the command's fate: one that finished lets the command end by
// itself; a client that went away or stopped reading (ctx ends, or a write fails) kills it,
// and Run returns ErrClientGone; a revoked token kills it; a shutdown, or a destroyed or
// paused sandbox, lets it run on (Result.Detached). When the stream finished and the command
// failed, the error is the command's. Run closes the stream.
func (e *StreamedExec) Run(ctx context.Context, idle time.Duration, begin func() error, write stream.Write) (ExecOutcome, error) {
	st := e.Stream
	defer st.Close()
	var (
		res     ExecResult
		err     error
		started bool
		begun   atomic.Bool // begin returned: the client has its headers
	)
	req := e.req
	req.started = func(serr error) {
		if serr != nil || started {
			return
		}
		started = true
		if begin != nil && begin() != nil {
			st.End(stream.ReasonClient)
		}
		begun.Store(true)
	}
	// A keep-alive (an empty batch, from Produce's timer) before begin would be the client's
	// first bytes: an answer of 200 before the command started, which leaves a command that
	// then fails to start no status of its own (a daemon slow to start one under load, out of
	// descriptors). Until begin there is nothing to keep alive.
	next := write
	write = func(items []stream.Item) error {
		if len(items) == 0 && !begun.Load() {
			return nil
		}
		return next(items)
	}
	// The command's context ends with the stream, with the cause that decides its fate
	// (endCause).
	reason := st.Produce(ctx, idle, write, func(pctx context.Context) {
		cctx, cancel := context.WithCancelCause(pctx)
		defer cancel(nil)
		// A command left to its own end by the stream's end is still killed when its client
		// goes: nobody would be left to tell how it ended.
		stop := context.AfterFunc(ctx, func() { cancel(killCauses[stream.ReasonClient]) })
		defer stop()
		res, err = e.m.ExecStream(cctx, e.sb, req, func(name string, data []byte) {
			st.SendWait(cctx, stream.Item{Event: name, Data: data})
		})
	}, endCause)
	switch {
	case !started && (ctx.Err() != nil || reason == stream.ReasonClient || err == nil):
		return ExecOutcome{}, ErrClientGone
	case !started:
		st.End(stream.ReasonError) // counted as the producer's failure when the stream closes
		return ExecOutcome{}, err
	case reason == stream.ReasonClient || reason == stream.ReasonSlow:
		return ExecOutcome{}, ErrClientGone
	case reason != stream.ReasonDone && !res.Detached && ctx.Err() != nil:
		return ExecOutcome{}, ErrClientGone // it went while its command ran on: killed
	}
	early := reason != stream.ReasonDone
	if err != nil && !early {
		st.End(stream.ReasonError)
		return ExecOutcome{}, err
	}
	out := ExecOutcome{Result: res, Ended: err == nil && !res.Detached}
	if early {
		out.Closed = reason
	}
	out.Capped, _ = st.Capped()
	return out, nil
}

// endCause is the cause a stream's end with reason cancels its command's context with:
// ErrDetach for the endings that let it run on (detaches), the kill cause for a client gone,
// slow or revoked; nil for the others (the sandbox failed, the stream's lifetime passed),
// which leave the command to its own end.
func endCause(reason stream.Reason) error {
	switch {
	case detaches[reason]:
		return ErrDetach
	case killCauses[reason] != nil:
		return killCauses[reason]
	}
	return nil
}
