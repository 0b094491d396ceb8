package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// ErrClientGone is what a streamed exec's Wait returns when its client went away or stopped
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

// killCause is the cause a stream that ended with reason kills its command with.
func killCause(reason stream.Reason) error {
	if err, ok := killCauses[reason]; ok {
		return err
	}
	return killCauses[stream.ReasonClient]
}

// detaches says which endings let the command run on (spec: shutdown, a destroyed or paused
// sandbox); a client that went, stopped reading or lost its token kills it.
var detaches = map[stream.Reason]bool{stream.ReasonShutdown: true, stream.ReasonDestroyed: true, stream.ReasonPaused: true}

// StreamedExec is one command whose output goes to a client as it prints. Its Stream carries
// items "stdout" and "stderr" (Data: the bytes, whole characters where the output is text) and
// at most one stream.EventCapped; it finishes when the command's output ends. The transport
// renders Stream with its one writer until Next says it finished or ended, then calls Wait
// exactly once with how that went.
type StreamedExec struct {
	Stream *stream.Stream

	cancel  context.CancelCauseFunc // ends the command's context: kill, or detach with ErrDetach
	outcome chan execOutcome        // capacity 1: the command's goroutine sends once
}

type execOutcome struct {
	res ExecResult
	err error
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

// StreamExec admits a streamed exec (the registry's limits apply to p), starts the command in
// the sandbox ref (through its daemon, else the provider's exec) and returns once it runs.
// Through a daemon that is when the daemon's start event has come, which Start waits for
// anyway: a command the daemon refuses (a cwd that does not exist, ErrInvalid) is StreamExec's
// error, so a transport answers it before it opens its stream, at no extra round trip. A
// command printing faster than the stream's pace waits for it, as for a slow terminal. The
// command's context is not ctx: it may outlive the request (a shutdown lets it run on); Wait
// decides its fate.
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
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	e := &StreamedExec{Stream: st, cancel: cancel, outcome: make(chan execOutcome, 1)}
	started := make(chan struct{})
	go func() {
		res, err := m.execStream(cctx, sb, req, func(name string, data []byte) {
			st.SendWait(cctx, stream.Item{Event: name, Data: data})
		}, func() { close(started) })
		st.Finish()
		e.outcome <- execOutcome{res, err}
	}()
	select {
	case <-started:
		return e, nil
	case o := <-e.outcome:
		select {
		case <-started: // it started, then ended before this select looked: a quick command
			e.outcome <- o // put back for Wait (the channel holds one, just taken)
			return e, nil
		default: // it ended before it started: refused, or its daemon did not answer
		}
		cancel(nil)
		st.End(stream.ReasonError)
		st.Close()
		if o.err == nil { // cannot be: execStream calls started before it can succeed
			o.err = fmt.Errorf("exec in sandbox %s: the command ended before it started", sb.Name)
		}
		return nil, o.err
	case <-ctx.Done(): // the client went while the daemon was starting it
		e.Wait(context.WithoutCancel(ctx), stream.ReasonClient)
		return nil, ErrClientGone
	}
}

// Wait decides the command's fate from how the rendering ended (reason: stream.ReasonDone
// when the stream finished, else the reason the stream ended), waits for it and closes the
// stream. A stream that finished lets the command end by itself; one whose client went away
// or stopped reading kills it, and Wait returns ErrClientGone; a revoked token kills it; a
// shutdown, or a destroyed or paused sandbox, lets it run on (Result.Detached). If ctx (the
// client's) ends while the command runs on, it is killed and Wait returns ErrClientGone. When
// the stream finished and the command failed, the error is the command's.
func (e *StreamedExec) Wait(ctx context.Context, reason stream.Reason) (ExecOutcome, error) {
	st := e.Stream
	defer st.Close()
	defer e.cancel(killCause(stream.ReasonClient))
	if reason != stream.ReasonDone {
		st.End(reason) // the first reason wins: a no-op when the stream already ended so
	}
	switch {
	case reason == stream.ReasonClient || reason == stream.ReasonSlow:
		e.cancel(killCause(reason))
		<-e.outcome
		return ExecOutcome{}, ErrClientGone
	case detaches[reason]:
		e.cancel(ErrDetach)
	case reason == stream.ReasonRevoked:
		e.cancel(killCause(reason))
	}
	o, err := e.await(ctx)
	if err != nil {
		st.End(stream.ReasonClient)
		return ExecOutcome{}, err
	}
	early := reason != stream.ReasonDone
	if o.err != nil && !early {
		st.End(stream.ReasonError)
		return ExecOutcome{}, o.err
	}
	out := ExecOutcome{Result: o.res, Ended: o.err == nil && !o.res.Detached}
	if early {
		out.Closed = reason
	}
	out.Capped, _ = st.Capped()
	return out, nil
}

// await waits for the command's outcome; when ctx ends first (the client went while its command
// ran on), the command is killed and await returns ErrClientGone. An outcome already there wins.
func (e *StreamedExec) await(ctx context.Context) (execOutcome, error) {
	select {
	case o := <-e.outcome:
		return o, nil
	default:
	}
	select {
	case o := <-e.outcome:
		return o, nil
	case <-ctx.Done():
		e.cancel(killCause(stream.ReasonClient))
		<-e.outcome
		return execOutcome{}, ErrClientGone
	}
}
