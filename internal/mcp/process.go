package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// processArgs are the process tool's arguments; which ones apply depends on the action.
type processArgs struct {
	Action       string  `json:"action" jsonschema:"start, attach, input, kill or list"`
	Sandbox      string  `json:"sandbox,omitempty" jsonschema:"the sandbox; a token bound to one sandbox may leave it out"`
	Command      string  `json:"command,omitempty" jsonschema:"start: the command, run with bash -lc"`
	Cwd          string  `json:"cwd,omitempty" jsonschema:"start: the working directory; default the sandbox's"`
	ProcessID    string  `json:"process_id,omitempty" jsonschema:"attach, input, kill: the process, as start returned it"`
	Since        int64   `json:"since,omitempty" jsonschema:"attach: the byte offset to read from, the next of the previous attach; default 0, all output still kept"`
	SinceSeconds *int64  `json:"since_seconds,omitempty" jsonschema:"attach, instead of since: read what it printed in the last N seconds (to within a second), as REST's ?since_seconds and kubectl logs --since"`
	WaitSeconds  float64 `json:"wait_seconds,omitempty" jsonschema:"attach: how long to wait for more output after what is kept, at most 600 (more is clamped to 600); default 0, return at once; the call returns early when the process ends"`
	Input        string  `json:"input,omitempty" jsonschema:"input: what to write to its standard input"`
	Base64       bool    `json:"base64,omitempty" jsonschema:"input: input is base64, for bytes that are not text"`
	EOF          bool    `json:"eof,omitempty" jsonschema:"input: close its standard input after writing"`
}

// maxWait bounds an attach's wait_seconds (the spec's 600): a longer wait is clamped, and the
// result says so.
const maxWait = 600 * time.Second

func (h *Handler) addProcess() {
	addTool(h.server, &mcp.Tool{
		Name:  "process",
		Title: "Background processes in a sandbox",
		Description: "Background processes that outlive the call. action start {command, cwd} starts one (bash -lc) and " +
			"returns its process_id at once. attach {process_id, since, wait_seconds} returns its output from since " +
			"(default: all still kept, the last 256 KiB; since_seconds: N instead, what it printed in the last N seconds), then waits up to wait_seconds (at most 600) for more, sent as " +
			"notifications/progress when the call has a progressToken (progress = the byte offset reached, message = " +
			"the text); it returns the last 64 KiB it saw (tail), state, exit_code and next: pass next as since to " +
			"carry on exactly where this left off. input {process_id, input, base64, eof} writes to its stdin. kill " +
			"{process_id} sends SIGTERM, then SIGKILL 3 s later. list shows this token's processes in the sandbox " +
			"(exited ones for 10 minutes). Only the token that started a process can see or touch it.",
	}, h.process)
}

func (h *Handler) process(ctx context.Context, req *mcp.CallToolRequest, in processArgs) (*mcp.CallToolResult, any, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, nil, errorf("This call carries no hangar token.")
	}
	ref := in.Sandbox
	if ref == "" {
		ref = p.Sandbox
	}
	if ref == "" {
		return nil, nil, errorf("Say which sandbox the process is in (the sandbox argument).")
	}
	if in.ProcessID == "" && (in.Action == "attach" || in.Action == "input" || in.Action == "kill") {
		return nil, nil, errorf("Say which process (the process_id argument, as start or list gave it).")
	}
	op := "process " + in.Action
	switch in.Action {
	case "start":
		if in.Command == "" {
			return nil, nil, errorf("command is empty: say what to run.")
		}
		info, err := h.cfg.Processes.Start(ctx, p, ref, process.StartRequest{Command: in.Command, Cwd: in.Cwd})
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, info.Wire(), nil
	case "list":
		ps, err := h.cfg.Processes.List(ctx, p, ref)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, map[string]any{"processes": from.Processes(ps)}, nil
	case "attach":
		out, err := h.attach(ctx, req, p, ref, in)
		if err != nil {
			return nil, nil, err
		}
		return nil, out, nil
	case "input":
		data := []byte(in.Input)
		if in.Base64 {
			var err error
			if data, err = base64.StdEncoding.DecodeString(in.Input); err != nil {
				return nil, nil, errorf("input is not valid base64 (base64: true says it is).")
			}
		}
		if len(data) == 0 && !in.EOF {
			return nil, nil, errorf("There is nothing to send: give input, eof: true, or both.")
		}
		if err := h.cfg.Processes.Input(ctx, p, ref, in.ProcessID, data, in.EOF); err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, map[string]any{"process_id": in.ProcessID, "sent": len(data), "eof": in.EOF}, nil
	case "kill":
		info, err := h.cfg.Processes.Kill(ctx, p, ref, in.ProcessID)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, info.Wire(), nil
	case "":
		return nil, nil, errorf("Say what to do (the action argument): start, attach, input, kill or list.")
	default:
		return nil, nil, errorf(fmt.Sprintf("There is no action %q: use start, attach, input, kill or list.", in.Action))
	}
}

// attach attaches to a process and renders what process.Attachment.Follow gives as progress
// notifications (this goroutine, the tool handler's, is the call's one writer), then its
// account as the result.
func (h *Handler) attach(ctx context.Context, req *mcp.CallToolRequest, p auth.Principal, ref string, in processArgs) (wire.ProcessAttach, error) {
	wait, notes, err := attachWait(in)
	if err != nil {
		return wire.ProcessAttach{}, err
	}
	if in.SinceSeconds != nil {
		if in.Since, err = h.sinceSeconds(ctx, p, ref, in); err != nil {
			return wire.ProcessAttach{}, err
		}
	}
	token := req.Params.GetProgressToken()
	sk := h.startCall(req)
	att, err := h.cfg.Processes.Attach(ctx, p, ref, in.ProcessID, in.Since)
	if err != nil {
		return wire.ProcessAttach{}, classify(h.log, "process attach", err)
	}
	defer att.Close()
	if in.Since > att.Info.OutputEnd {
		notes = append(notes, fmt.Sprintf("since %d is past the end of the output (%d so far): nothing was there to read, and next is the end.", in.Since, att.Info.OutputEnd))
	}
	// A 2025-era call's context does not end when its HTTP request does: watch the request too.
	ctx, cancel := watchClient(ctx, sk)
	defer cancel()
	pr := &progress{req: req, token: token, sk: sk, st: att.Stream}
	seen, err := att.Follow(ctx, wait, pr.write(ctx))
	switch {
	case errors.Is(err, errGone):
		return wire.ProcessAttach{}, err
	case err != nil:
		return wire.ProcessAttach{}, errorf("The call was cancelled.")
	}
	return attachResult(seen, token != nil, notes), nil
}

// sinceSeconds is the offset an attach with since_seconds starts at: where what the process
// printed in the last since_seconds begins.
func (h *Handler) sinceSeconds(ctx context.Context, p auth.Principal, ref string, in processArgs) (int64, error) {
	switch {
	case in.Since != 0:
		return 0, errorf("Give since (a byte offset) or since_seconds (the output of the last N seconds), not both.")
	case *in.SinceSeconds < 0:
		return 0, errorf("since_seconds must be a whole number of seconds, 0 or more.")
	}
	ago := time.Duration(min(*in.SinceSeconds, math.MaxInt64/int64(time.Second))) * time.Second
	off, err := h.cfg.Processes.OffsetSince(ctx, p, ref, in.ProcessID, ago)
	if err != nil {
		return 0, classify(h.log, "process attach", err)
	}
	return off, nil
}

// attachWait checks an attach's since and wait_seconds, and returns how long to wait and the
// notes a clamped wait needs.
func attachWait(in processArgs) (time.Duration, []string, error) {
	if in.Since < 0 {
		return 0, nil, errorf("since must be a byte offset, 0 or more: the next of the previous attach, or 0 for all the output still kept.")
	}
	if in.WaitSeconds < 0 {
		return 0, nil, errorf("wait_seconds must be a number of seconds, 0 or more (at most 600).")
	}
	if in.WaitSeconds > maxWait.Seconds() {
		return maxWait, []string{fmt.Sprintf("wait_seconds is at most 600: this call waited up to 600 s, not %g.", in.WaitSeconds)}, nil
	}
	return time.Duration(in.WaitSeconds * float64(time.Second)), nil, nil
}

// attachResult is the attach's answer: what it saw, and notes on what a reader should know.
func attachResult(seen process.Seen, streamed bool, notes []string) wire.ProcessAttach {
	out := wire.ProcessAttach{ProcessID: seen.Info.ID, State: string(seen.Info.State), ExitCode: seen.Info.ExitCode, Status: seen.Info.Status,
		TailFrom: seen.TailFrom, Next: seen.Next, Gap: from.ProcessGap(seen.Gap), Streamed: streamed, Closed: string(seen.Closed), Capped: seen.Capped}
	out.Tail, out.TailEncoding = wire.Text(seen.Tail)
	notes = append(notes, seen.Notes...) // each gap's and the cap's, as they came
	if seen.Closed != "" {
		notes = append(notes, fmt.Sprintf("The attachment ended early (%s); the process may still be running: attach again from next.", seen.Closed))
	}
	out.Notes = notes
	return out
}
