package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// execArgs are the exec tool's arguments.
type execArgs struct {
	Sandbox string            `json:"sandbox,omitempty" jsonschema:"the sandbox to run the command in; a token bound to one sandbox may leave it out"`
	Command string            `json:"command" jsonschema:"the command, run with bash -lc (sh -c where there is no bash)"`
	Cwd     string            `json:"cwd,omitempty" jsonschema:"the working directory; default the sandbox's"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"environment variables added to the sandbox's"`
	Timeout float64           `json:"timeout,omitempty" jsonschema:"seconds before the command is killed; 0 or absent for none"`
	Stream  bool              `json:"stream,omitempty" jsonschema:"send the output as progress notifications as it prints (needs a progressToken on the call)"`
}

// Progress notifications carry these _meta keys: which output a chunk is (stdout or stderr)
// and, for a chunk that is not valid UTF-8, encoding "base64".
const (
	metaStream   = "hangar.dev/stream"
	metaEncoding = "hangar.dev/encoding"
)

// cappedNotice is the progress message sent once when a stream reaches its byte cap.
const cappedNotice = "[hangar: this stream reached HANGAR_STREAM_MAX_BYTES; nothing more is sent until the result]"

func (h *Handler) addExec() {
	addTool(h.server, &mcp.Tool{
		Name:  "exec",
		Title: "Run a command in a sandbox",
		Description: "Runs a command in a sandbox and returns its exit code and the last 256 KiB of its stdout " +
			"and stderr. With stream: true and a progressToken on the call, each chunk of output is sent as a " +
			"notifications/progress as it prints (progress = bytes so far, message = the text).",
	}, h.exec)
}

func (h *Handler) exec(ctx context.Context, req *mcp.CallToolRequest, in execArgs) (*mcp.CallToolResult, wire.ExecResult, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, wire.ExecResult{}, errorf("This call carries no hangar token.")
	}
	ref := in.Sandbox
	if ref == "" {
		ref = p.Sandbox
	}
	if ref == "" {
		return nil, wire.ExecResult{}, errorf("Say which sandbox to run the command in (the sandbox argument).")
	}
	timeout, err := sandbox.TimeoutSeconds(in.Timeout)
	if err != nil {
		return nil, wire.ExecResult{}, classify(h.log, "exec", err)
	}
	ereq := sandbox.ExecRequest{Command: in.Command, Cwd: in.Cwd, Env: in.Env, Timeout: timeout}
	if in.Command == "" {
		return nil, wire.ExecResult{}, errorf("command is empty: say what to run.")
	}
	if err := sandbox.CheckExec(ereq); err != nil {
		return nil, wire.ExecResult{}, classify(h.log, "exec", err)
	}
	token := req.Params.GetProgressToken()
	if !in.Stream || token == nil {
		res, err := h.cfg.Sandboxes.Exec(ctx, p, ref, ereq)
		if err != nil {
			if ctx.Err() != nil {
				return nil, wire.ExecResult{}, errorf("The call was cancelled; the command was killed.")
			}
			return nil, wire.ExecResult{}, classify(h.log, "exec", err)
		}
		return result(res, true, "", false)
	}
	return h.execStream(ctx, req, p, ref, ereq, token)
}

// execStream runs a command whose output goes to the caller as progress notifications. This
// goroutine (the tool handler's) reads the command's output from the daemon and renders it
// (sandbox.StreamedExec.Run).
func (h *Handler) execStream(ctx context.Context, req *mcp.CallToolRequest, p auth.Principal, ref string, ereq sandbox.ExecRequest, token any) (*mcp.CallToolResult, wire.ExecResult, error) {
	ex, err := h.cfg.Sandboxes.StreamExec(ctx, p, ref, ereq)
	if err != nil {
		return nil, wire.ExecResult{}, classify(h.log, "exec", err)
	}
	sk := h.callSink(req)
	// A 2025-era call's context does not end when its HTTP request does: watch the request too.
	ctx, cancel := watchClient(ctx, sk)
	defer cancel()
	pr := &progress{req: req, token: token, sk: sk, st: ex.Stream}
	// The call's stream begins once the command started: one that does not start is the
	// call's error, as any other.
	o, err := ex.Run(ctx, 0, func() error { h.beginCall(sk); return nil }, pr.write(ctx))
	switch {
	case errors.Is(err, sandbox.ErrClientGone):
		return nil, wire.ExecResult{}, errorf("The client went away; the command was killed.")
	case err != nil:
		return nil, wire.ExecResult{}, classify(h.log, "exec", err)
	}
	return result(o.Result, o.Ended, string(o.Closed), o.Capped)
}

// startCall readies a streaming call's response: the call counts as in flight until its
// response is written, so that a shutdown can wait for it, and the stream's headers go out at
// once. It returns the call's sink, or nil when it has none (a test's in-memory transport).
func (h *Handler) startCall(req *mcp.CallToolRequest) *sink {
	sk := h.callSink(req)
	h.beginCall(sk)
	return sk
}

// callSink is the call's sink, or nil when it has none (a test's in-memory transport).
func (h *Handler) callSink(req *mcp.CallToolRequest) *sink {
	if req.Extra == nil {
		return nil
	}
	return h.sinkOf(req.Extra.Header)
}

// beginCall is startCall for a sink already found (nil: nothing to do).
func (h *Handler) beginCall(sk *sink) {
	if sk != nil {
		h.running.Enter()
		sk.whenClosed(h.running.Leave)
		sk.startStream()
	}
}

// watchClient returns ctx, ended also when the call's HTTP request ends (sk nil: ctx alone).
func watchClient(ctx context.Context, sk *sink) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if sk != nil {
		go func() {
			select {
			case <-sk.gone():
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// result is exec's answer: the structured output, and a short text for readers of text
// content.
func result(res sandbox.ExecResult, ended bool, closed string, capped bool) (*mcp.CallToolResult, wire.ExecResult, error) {
	out := from.ExecResult(res, ended, closed, capped)
	var summary string
	switch {
	case closed != "" && out.ExitCode == nil:
		summary = fmt.Sprintf("The stream ended before the command did (%s).", closed)
	case closed != "":
		summary = fmt.Sprintf("The stream ended early (%s); the command exited with code %d.", closed, res.ExitCode)
	case res.TimedOut:
		summary = "The command was killed at its timeout."
	default:
		summary = fmt.Sprintf("The command exited with code %d.", res.ExitCode)
	}
	summary += fmt.Sprintf(" stdout: %d bytes, stderr: %d bytes (the last 256 KiB of each are in the structured result).", len(res.Stdout), len(res.Stderr))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}}}, out, nil
}
