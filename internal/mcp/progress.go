package mcp

import (
	"context"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/stream"
)

// progress is the one MCP renderer of a stream: each item becomes a notifications/progress on
// the call's progressToken, written by the tool handler's goroutine (the call's one writer)
// straight through the SDK to the call's response. An output item's message is its text (or
// base64, with _meta encoding), its _meta stream the item's event, and its progress the item's
// position (ID) when it has one, else the bytes of output so far; the stream's capped notice
// comes half a step after the last progress, which always rises.
type progress struct {
	req   *mcp.CallToolRequest
	token any   // nil: the call asked for no progress; nothing is sent
	sk    *sink // nil without an HTTP response (a test's in-memory transport)
	st    *stream.Stream
	last  float64 // the last progress sent
	sent  int64   // bytes of output rendered
}

// errGone is what progress's methods return once a notification could not be written: the
// stream was ended (ReasonSlow or ReasonClient).
var errGone = errorf("The client went away.")

// item renders one item of the stream: output, or the capped notice. A JSON event is the
// caller's to say (note).
func (p *progress) item(ctx context.Context, it stream.Item) error {
	if it.JSON {
		return nil
	}
	if it.Event == stream.EventCapped {
		return p.notify(ctx, &mcp.ProgressNotificationParams{Progress: p.last + 0.5, Message: cappedNotice})
	}
	p.sent += int64(len(it.Data))
	at := float64(p.sent)
	if it.ID != "" {
		if off, err := strconv.ParseInt(it.ID, 10, 64); err == nil {
			at = float64(off)
		}
	}
	params := &mcp.ProgressNotificationParams{Progress: at, Meta: mcp.Meta{metaStream: it.Event}}
	var enc string
	if params.Message, enc = text(it.Data); enc != "" {
		params.Meta[metaEncoding] = enc
	}
	return p.notify(ctx, params)
}

// note sends a sentence about the stream (a gap in a process's output) at progress at.
func (p *progress) note(ctx context.Context, event, message string, at float64) error {
	return p.notify(ctx, &mcp.ProgressNotificationParams{Progress: at, Message: message, Meta: mcp.Meta{metaStream: event}})
}

func (p *progress) notify(ctx context.Context, params *mcp.ProgressNotificationParams) error {
	if p.token == nil {
		return nil
	}
	params.ProgressToken = p.token
	if err := p.req.Session.NotifyProgress(ctx, params); err != nil {
		reason := stream.ReasonClient
		if p.sk != nil {
			if _, slow := p.sk.failed(); slow {
				reason = stream.ReasonSlow
			}
		}
		p.st.End(reason)
		return errGone
	}
	p.last = params.Progress
	return nil
}
