package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stream"
)

// outputJSON is a stdout or stderr event's data. Output that is not valid UTF-8 is sent base64
// with encoding "base64".
type outputJSON struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// streamResultJSON is the result event of exec/stream: exec's result, plus how the stream
// ended when that was not its natural end.
type streamResultJSON struct {
	ExitCode *int `json:"exit_code"` // null when the command was let go still running
	execResultJSON
	Closed string `json:"closed,omitempty"` // why the stream ended early: shutdown, destroyed, revoked, ...
	Capped bool   `json:"capped,omitempty"` // the stream reached HANGAR_STREAM_MAX_BYTES
}

type execOutcome struct {
	res sandbox.ExecResult
	err error
}

// errKill ends a streamed command's context so that the command is killed; killCause says why
// in the command's status ("killed: ...").
var errKill = errors.New("the stream's client is gone")

// killCauses are the reasons, other than the client's going, for which a stream kills its
// command, as the command's status words them.
var killCauses = map[stream.Reason]error{
	stream.ReasonSlow:    errors.New("the stream's client stopped reading"),
	stream.ReasonRevoked: errors.New("the stream's token was revoked or expired"),
}

func killCause(reason stream.Reason) error {
	if err, ok := killCauses[reason]; ok {
		return err
	}
	return errKill
}

// detaches says which endings let the command run on (spec: shutdown, a destroyed or paused
// sandbox); every other early end kills it.
var detaches = map[stream.Reason]bool{stream.ReasonShutdown: true, stream.ReasonDestroyed: true, stream.ReasonPaused: true}

// execStream is POST /api/sandboxes/{ref}/exec/stream: SSE stdout and stderr events as the
// command prints, then one result event.
func (a *api) execStream(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	ereq, err := req.toDomain()
	if err == nil {
		err = sandbox.CheckExec(ereq)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	p := principal(r)
	sb, err := a.Sandboxes.Runnable(r.Context(), p, chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	st, err := a.Streams.Open(r.Context(), stream.Options{Kind: stream.KindExec, Principal: p, Sandbox: sb.Name})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer st.Close()
	sse, err := startSSE(w)
	if err != nil {
		st.End(stream.ReasonClient)
		return
	}

	// The command's context is not the request's: the command may outlive the request (a
	// shutdown lets it run on), and when it must die it is cancelled with errKill.
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(errKill)
	outcome := make(chan execOutcome, 1)
	go func() {
		res, err := a.Sandboxes.ExecStream(cctx, sb, ereq, func(name string, data []byte) {
			st.SendWait(cctx, stream.Item{Event: name, Data: data}) // a command printing faster than the pace waits
		})
		st.Finish()
		outcome <- execOutcome{res, err}
	}()

	reason := a.pump(r.Context(), st, sse)
	switch {
	case reason == stream.ReasonClient || reason == stream.ReasonSlow:
		cancel(killCause(reason))
		<-outcome // nobody to tell
		return
	case detaches[reason]:
		cancel(sandbox.ErrDetach)
	case reason == stream.ReasonRevoked:
		cancel(killCause(reason))
	}
	var o execOutcome
	select {
	case o = <-outcome:
	case <-r.Context().Done(): // gone while its command ran on (limit, byte cap)
		cancel(errKill)
		<-outcome
		return
	}
	// A stream ended early reports what the command printed until then, whatever became of
	// the command (killed, let go, or cut off with its sandbox).
	early := reason != stream.ReasonDone
	if o.err != nil && !early {
		// The stream is open, so the error travels as an event, and the stream ends as failed.
		st.End(stream.ReasonError)
		e := classify(o.err)
		if e.code == CodeInternal {
			a.log.Error("exec stream", "sandbox", sb.Name, "err", o.err)
			e.detail = "" // the cause stays in the log, as writeError does
		}
		sse.event("error", "", map[string]any{"code": e.code, "message": e.message, "detail": e.detail})
		sse.flush()
		return
	}
	out := streamResultJSON{execResultJSON: toExecResultJSON(o.res)}
	if o.err == nil && !o.res.Detached { // it ended by itself, even if the stream did not
		out.ExitCode = &o.res.ExitCode
	}
	if early {
		out.Closed = string(reason)
	}
	out.Capped, _ = st.Capped()
	sse.event("result", "", out)
	sse.flush()
}

// pump is the stream's one writer: it sends what the stream gives as SSE events, with a
// keep-alive comment when idle, until the stream finishes (ReasonDone) or ends, and returns why.
func (a *api) pump(ctx context.Context, st *stream.Stream, sse *sseWriter) stream.Reason {
	for {
		items, err := st.Next(ctx, keepAliveInterval)
		var ended *stream.Ended
		switch {
		case errors.Is(err, io.EOF):
			return stream.ReasonDone
		case errors.As(err, &ended):
			return ended.Reason
		case err != nil: // the request's context: the client went away
			st.End(stream.ReasonClient)
			return stream.ReasonClient
		case len(items) == 0:
			if err := sse.comment("keep-alive"); err != nil {
				return a.clientFailed(st, err)
			}
			continue
		}
		for _, it := range items {
			var err error
			switch it.Event {
			case stream.EventCapped:
				_, dropped := st.Capped()
				err = sse.event("capped", "", map[string]any{"message": "this stream reached HANGAR_STREAM_MAX_BYTES; nothing more is sent until the end", "dropped": dropped})
			case process.EventGap, process.EventEnd: // already JSON
				err = sse.event(it.Event, it.ID, json.RawMessage(it.Data))
			default:
				var o outputJSON
				o.Data, o.Encoding = text(it.Data)
				err = sse.event(it.Event, it.ID, o)
			}
			if err != nil {
				return a.clientFailed(st, err)
			}
		}
		if err := sse.flush(); err != nil {
			return a.clientFailed(st, err)
		}
	}
}

// clientFailed ends a stream whose client write failed: slow when the write timed out, else
// the client is gone.
func (a *api) clientFailed(st *stream.Stream, err error) stream.Reason {
	reason := stream.ReasonClient
	if timedOut(err) {
		reason = stream.ReasonSlow
	}
	st.End(reason)
	return st.Reason()
}

func (req execRequest) toDomain() (sandbox.ExecRequest, error) {
	if req.Timeout < 0 {
		return sandbox.ExecRequest{}, newError(CodeBadRequest, "timeout must be a number of seconds, 0 for none.", errors.New("negative timeout: "+strconv.FormatFloat(req.Timeout, 'g', -1, 64)))
	}
	return sandbox.ExecRequest{Command: req.Command, Cwd: req.Cwd, Env: req.Env, Timeout: time.Duration(req.Timeout * float64(time.Second))}, nil
}
