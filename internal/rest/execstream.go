package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// execStream is POST /api/sandboxes/{ref}/exec/stream: SSE stdout and stderr events as the
// command prints, then one result event (or an error event when the command failed).
func (a *api) execStream(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	ereq, err := req.toDomain()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ex, err := a.Sandboxes.StreamExec(r.Context(), principal(r), chi.URLParam(r, "ref"), ereq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// This goroutine reads the command's output from the daemon and writes it (Run): the
	// headers go out once the command started, so a command that does not start gets a
	// status of its own.
	sse := a.newSSE(w, r)
	defer sse.release()
	began := false
	o, err := ex.Run(sse.context(), keepAliveInterval, func() error { began = true; return sse.open() }, a.render(ex.Stream, sse))
	switch {
	case errors.Is(err, sandbox.ErrClientGone):
		return // nobody to tell
	case err != nil && !began:
		a.writeError(w, r, err)
		return
	case err != nil: // the stream is open, so the error travels as an event
		e := a.classify(r, err)
		sse.event("error", "", map[string]any{"code": e.Code, "message": e.Message, "detail": e.Detail})
		sse.send()
		return
	}
	sse.event("result", "", from.ExecResult(o.Result, o.Ended, string(o.Closed), o.Capped))
	sse.send()
}

// pump is the stream's one writer, with render: it sends what the stream gives as SSE events,
// a batch per write, with a keep-alive comment when idle, until the stream finishes
// (ReasonDone) or ends, and returns why.
func (a *api) pump(ctx context.Context, st *stream.Stream, sse *sseWriter) stream.Reason {
	return st.Render(ctx, keepAliveInterval, a.render(st, sse))
}

// render is the one SSE renderer of every kind of stream: it writes a batch of the stream's
// items, or a keep-alive comment for none. An item is output (data: its text, or base64) or,
// marked JSON, an event whose data it is; the stream's own capped notice says how much was not
// sent. The item's ID is the event's id, what Last-Event-ID resumes from. It may run on a
// producer's goroutine (stream.Render's write-through, stream.Produce).
func (a *api) render(st *stream.Stream, sse *sseWriter) stream.Write {
	return func(items []stream.Item) error {
		if len(items) == 0 {
			sse.comment("keep-alive")
		}
		for _, it := range items {
			switch {
			case it.Event == stream.EventCapped:
				_, dropped := st.Capped()
				sse.event("capped", "", map[string]any{"message": "this stream reached HANGAR_STREAM_MAX_BYTES; nothing more is sent until the end", "dropped": dropped})
			case it.JSON:
				sse.rawEvent(it.Event, it.ID, it.Data)
			default:
				sse.outputEvent(it.Event, it.ID, it.Data)
			}
		}
		if err := sse.send(); err != nil {
			a.clientFailed(st, err)
			return err
		}
		return nil
	}
}

// clientFailed ends a stream whose client write failed: slow when the write timed out, else
// the client is gone.
func (a *api) clientFailed(st *stream.Stream, err error) stream.Reason {
	if timedOut(err) {
		st.EndSlow(stream.SlowWriteTimeout)
	} else {
		st.End(stream.ReasonClient)
	}
	return st.Reason()
}

func (req execRequest) toDomain() (sandbox.ExecRequest, error) {
	timeout, err := sandbox.TimeoutSeconds(req.Timeout)
	return sandbox.ExecRequest{Command: req.Command, Cwd: req.Cwd, Env: req.Env, Timeout: timeout}, err
}
