package mcp

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// progress is the one MCP renderer of a stream: output becomes notifications/progress on the
// call's progressToken, written by the tool handler's goroutine (the call's one writer)
// straight through the SDK to the call's response. An output notification's message is its
// text (or base64, with _meta encoding), its _meta stream the output's event, and its progress
// the output's position (the last item's ID) when it has one, else the bytes of output so
// far; the stream's capped notice comes half a step after the last progress, which always
// rises.
//
// Output items of one batch (what was already queued when the writer took) that follow each
// other on the same event go out as one notification, as long as they are text and together
// no larger than one item may be: a burst costs one notification, one encoding and one event
// for the client to handle, not one per read. The writer calls flush at the end of each
// batch, so nothing waits for the next one.
type progress struct {
	req   *mcp.CallToolRequest
	token any   // nil: the call asked for no progress; nothing is sent
	sk    *sink // nil without an HTTP response (a test's in-memory transport)
	st    *stream.Stream
	last  float64 // the last progress sent
	sent  int64   // bytes of output rendered

	// The run of output not sent yet: first alone, or (once a second item joined) merged.
	run      bool
	runEvent string
	runAt    float64
	runFirst []byte // the run's only item, not copied
	merged   []byte // the run's items copied together
	spare    []byte // the last merged run's buffer, for the next

	// Output notifications written straight to the response (progresswire.go).
	tokenJSON []byte // the token's JSON, once encoded
	tokenErr  bool   // the token cannot be encoded: the SDK sends everything
	event     []byte // the buffer events are encoded in, kept for the next
}

// write is the renderer as a stream's writer: it renders a batch's items, then flushes.
func (p *progress) write(ctx context.Context) stream.Write {
	return func(items []stream.Item) error {
		for _, it := range items {
			if err := p.item(ctx, it); err != nil {
				return err
			}
		}
		return p.flush(ctx)
	}
}

// errGone is what progress's methods return once a notification could not be written: the
// stream was ended (ReasonSlow or ReasonClient).
var errGone = errorf("The client went away.")

// item renders one item of the stream: text (output, or a sentence such as a process's gap
// note: process.Attachment.Follow turns one into the other), or the capped notice. A JSON
// item is not shown: the call's result says what it meant.
func (p *progress) item(ctx context.Context, it stream.Item) error {
	if it.JSON {
		return nil
	}
	if it.Event == stream.EventCapped {
		if err := p.flush(ctx); err != nil {
			return err
		}
		return p.notify(ctx, &mcp.ProgressNotificationParams{Progress: p.last + 0.5, Message: cappedNotice})
	}
	p.sent += int64(len(it.Data))
	at := float64(p.sent)
	if it.ID != "" {
		if off, err := strconv.ParseInt(it.ID, 10, 64); err == nil {
			at = float64(off)
		}
	}
	if p.run && it.Event == p.runEvent && p.runLen()+len(it.Data) <= p.st.MaxItem() && utf8.Valid(it.Data) && (p.merged != nil || utf8.Valid(p.runFirst)) {
		if p.merged == nil {
			p.merged = append(p.mergedBuf(), p.runFirst...)
		}
		p.merged = append(p.merged, it.Data...)
		p.runAt = at
		return nil
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	p.run, p.runEvent, p.runAt, p.runFirst = true, it.Event, at, it.Data
	return nil
}

func (p *progress) runLen() int {
	if p.merged != nil {
		return len(p.merged)
	}
	return len(p.runFirst)
}

// mergedBuf is an empty buffer for a new merged run, the last one's when it was not too big.
func (p *progress) mergedBuf() []byte {
	return p.spare[:0]
}

// flush sends the run of output waiting, if any.
func (p *progress) flush(ctx context.Context) error {
	if !p.run {
		return nil
	}
	data := p.runFirst
	if p.merged != nil {
		data = p.merged
	}
	event, at := p.runEvent, p.runAt
	if p.merged != nil && cap(p.merged) <= maxKeptRun {
		p.spare = p.merged // reused by the next run, once this one is written
	}
	p.run, p.runFirst, p.merged = false, nil, nil
	if p.token == nil {
		return nil
	}
	if sent, err := p.notifyDirect(event, data, at); sent {
		return p.notified(err, at)
	}
	params := &mcp.ProgressNotificationParams{Progress: at, Meta: mcp.Meta{metaStream: event}}
	var enc string
	if params.Message, enc = wire.Text(data); enc != "" {
		params.Meta[metaEncoding] = enc
	}
	return p.notify(ctx, params)
}

// notifyDirect writes an output notification straight to the call's response, as the SDK
// would (progresswire.go). It reports false, having written nothing, when there is no such
// response to write to (no sink, or it is not an open event stream): the SDK sends it then.
func (p *progress) notifyDirect(event string, data []byte, at float64) (bool, error) {
	if p.sk == nil || p.tokenErr {
		return false, nil
	}
	if p.tokenJSON == nil {
		tok, ok := tokenJSON(p.token)
		if !ok {
			p.tokenErr = true
			return false, nil
		}
		p.tokenJSON = tok
	}
	p.event = appendProgressEvent(p.event[:0], p.tokenJSON, event, data, at)
	sent, err := p.sk.event(p.event)
	if cap(p.event) > maxKeptRun {
		p.event = nil
	}
	return sent, err
}

// maxKeptRun is the largest merged buffer kept for the next run.
const maxKeptRun = 64 << 10

func (p *progress) notify(ctx context.Context, params *mcp.ProgressNotificationParams) error {
	if p.token == nil {
		return nil
	}
	params.ProgressToken = p.token
	return p.notified(p.req.Session.NotifyProgress(ctx, params), params.Progress)
}

// notified records a notification of progress written, or, when its write failed (err), ends
// the stream: slow when the client did not take it in time, else the client is gone.
func (p *progress) notified(err error, progress float64) error {
	if err != nil {
		if p.sk != nil {
			if _, slow := p.sk.failed(); slow {
				p.st.EndSlow(stream.SlowWriteTimeout)
				return errGone
			}
		}
		p.st.End(stream.ReasonClient)
		return errGone
	}
	p.last = progress
	return nil
}
