package mcp

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Terminals for clients that poll: a terminal is a background process on a pseudo-terminal
// (process.StartRequest.PTY), its terminal_id the process id. terminal_read returns what is new
// since the last terminal_read of that terminal by this token: the process package keeps that
// position (ReadNext), so this transport holds no state.

type terminalOpenArgs struct {
	Sandbox string `json:"sandbox,omitempty" jsonschema:"the sandbox; a token bound to one sandbox may leave it out"`
	Command string `json:"command,omitempty" jsonschema:"what runs in the terminal; default a login shell (bash -l, or sh)"`
	Cwd     string `json:"cwd,omitempty" jsonschema:"the working directory; default the sandbox's"`
	Cols    int    `json:"cols,omitempty" jsonschema:"columns; default 120"`
	Rows    int    `json:"rows,omitempty" jsonschema:"rows; default 40"`
}

type terminalOpenOutput struct {
	TerminalID string `json:"terminal_id"`
	Sandbox    string `json:"sandbox"`
	Command    string `json:"command"`
}

type terminalIDArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the terminal, as terminal_open returned it"`
	Sandbox    string `json:"sandbox,omitempty" jsonschema:"needed only if hangar was restarted since the terminal was opened"`
}

type terminalWriteArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the terminal, as terminal_open returned it"`
	Input      string `json:"input" jsonschema:"what to type; end a line with \\n to run it"`
	Sandbox    string `json:"sandbox,omitempty" jsonschema:"needed only if hangar was restarted since the terminal was opened"`
}

type terminalResizeArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the terminal, as terminal_open returned it"`
	Cols       int    `json:"cols" jsonschema:"columns"`
	Rows       int    `json:"rows" jsonschema:"rows"`
	Sandbox    string `json:"sandbox,omitempty" jsonschema:"needed only if hangar was restarted since the terminal was opened"`
}

// terminalReadOutput is what terminal_read returns. Output that is not valid UTF-8 is sent
// base64, with encoding "base64".
type terminalReadOutput struct {
	TerminalID string `json:"terminal_id"`
	Output     string `json:"output" jsonschema:"what the terminal printed since the last terminal_read"`
	Encoding   string `json:"encoding,omitempty" jsonschema:"base64 when output is not valid UTF-8"`
	Lost       int64  `json:"lost,omitempty" jsonschema:"bytes printed since the last read that are no longer kept"`
	Note       string `json:"note,omitempty"`
	State      string `json:"state" jsonschema:"running or exited"`
	ExitCode   *int   `json:"exit_code" jsonschema:"the exit code once exited, else null"`
}

type terminalOKOutput struct {
	TerminalID string `json:"terminal_id"`
	State      string `json:"state,omitempty"`
}

// defaultShell is terminal_open's command when none is given.
const defaultShell = "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh; fi"

// maxTermSize bounds cols and rows: a terminal larger than this is a mistake.
const maxTermSize = 1000

func (h *Handler) addTerminals() {
	addTool(h.server, &mcp.Tool{
		Name:  "terminal_open",
		Title: "Open a terminal in a sandbox",
		Description: "Starts a command (default a login shell) on a terminal in a sandbox and returns its terminal_id. " +
			"Type into it with terminal_write, poll what it shows with terminal_read, end it with terminal_close. " +
			"To follow output as it prints, use the process tool's attach with the terminal_id as process_id.",
	}, h.terminalOpen)
	addTool(h.server, &mcp.Tool{
		Name:        "terminal_write",
		Title:       "Type into a terminal",
		Description: "Types input into a terminal opened with terminal_open (end a line with \\n to run it).",
	}, h.terminalWrite)
	addTool(h.server, &mcp.Tool{
		Name:  "terminal_read",
		Title: "Read a terminal",
		Description: "Returns what a terminal printed since the last terminal_read of it (the first read: everything " +
			"still kept, the last 256 KiB), with its state and exit_code. It returns at once.",
	}, h.terminalRead)
	addTool(h.server, &mcp.Tool{
		Name:        "terminal_resize",
		Title:       "Resize a terminal",
		Description: "Changes a terminal's size in columns and rows.",
	}, h.terminalResize)
	addTool(h.server, &mcp.Tool{
		Name:        "terminal_close",
		Title:       "Close a terminal",
		Description: "Ends a terminal: SIGTERM to what runs in it, SIGKILL 3 s later if it is still running.",
	}, h.terminalClose)
}

func (h *Handler) terminalOpen(ctx context.Context, req *mcp.CallToolRequest, in terminalOpenArgs) (*mcp.CallToolResult, terminalOpenOutput, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, terminalOpenOutput{}, errorf("This call carries no hangar token.")
	}
	ref := in.Sandbox
	if ref == "" {
		ref = p.Sandbox
	}
	if ref == "" {
		return nil, terminalOpenOutput{}, errorf("Say which sandbox to open the terminal in (the sandbox argument).")
	}
	if in.Cols < 0 || in.Rows < 0 || in.Cols > maxTermSize || in.Rows > maxTermSize {
		return nil, terminalOpenOutput{}, errorf(fmt.Sprintf("cols and rows must be between 1 and %d.", maxTermSize))
	}
	size := process.PTYSize{Cols: 120, Rows: 40}
	if in.Cols > 0 {
		size.Cols = uint32(in.Cols)
	}
	if in.Rows > 0 {
		size.Rows = uint32(in.Rows)
	}
	command := in.Command
	if command == "" {
		command = defaultShell
	}
	info, err := h.cfg.Processes.Start(ctx, p, ref, process.StartRequest{Command: command, Cwd: in.Cwd, PTY: &size})
	if err != nil {
		return nil, terminalOpenOutput{}, classify(h.log, "terminal_open", err)
	}
	return nil, terminalOpenOutput{TerminalID: info.ID, Sandbox: info.Sandbox, Command: command}, nil
}

func (h *Handler) terminalWrite(ctx context.Context, req *mcp.CallToolRequest, in terminalWriteArgs) (*mcp.CallToolResult, terminalOKOutput, error) {
	if in.Input == "" {
		return nil, terminalOKOutput{}, errorf("input is empty: say what to type.")
	}
	p, sandbox, err := h.terminal(ctx, req, in.TerminalID, in.Sandbox)
	if err != nil {
		return nil, terminalOKOutput{}, err
	}
	if err := h.cfg.Processes.Input(ctx, p, sandbox, in.TerminalID, []byte(in.Input), false); err != nil {
		return nil, terminalOKOutput{}, h.terminalError(in.TerminalID, "terminal_write", err)
	}
	return nil, terminalOKOutput{TerminalID: in.TerminalID, State: string(process.StateRunning)}, nil
}

func (h *Handler) terminalRead(ctx context.Context, req *mcp.CallToolRequest, in terminalIDArgs) (*mcp.CallToolResult, terminalReadOutput, error) {
	p, sandbox, err := h.terminal(ctx, req, in.TerminalID, in.Sandbox)
	if err != nil {
		return nil, terminalReadOutput{}, err
	}
	o, info, err := h.cfg.Processes.ReadNext(ctx, p, sandbox, in.TerminalID)
	if err != nil {
		return nil, terminalReadOutput{}, h.terminalError(in.TerminalID, "terminal_read", err)
	}
	if !info.PTY {
		return nil, terminalReadOutput{}, errorf(fmt.Sprintf("%s is a background process, not a terminal: use the process tool's attach.", in.TerminalID))
	}
	out := terminalReadOutput{TerminalID: in.TerminalID, State: string(info.State), ExitCode: info.ExitCode}
	out.Output, out.Encoding = wire.Text(o.Data)
	if o.Gap != nil {
		out.Lost = o.Gap.To - o.Gap.From
		out.Note = fmt.Sprintf("%d bytes the terminal printed since the last read are no longer kept (hangar keeps the last 256 KiB); the output starts after them.", out.Lost)
		if o.Gap.Lost != "" {
			out.Note = "Output the terminal printed since the last read is gone: " + o.Gap.Lost + "."
		}
	}
	return nil, out, nil
}

func (h *Handler) terminalResize(ctx context.Context, req *mcp.CallToolRequest, in terminalResizeArgs) (*mcp.CallToolResult, terminalOKOutput, error) {
	if in.Cols < 1 || in.Rows < 1 || in.Cols > maxTermSize || in.Rows > maxTermSize {
		return nil, terminalOKOutput{}, errorf(fmt.Sprintf("cols and rows must be between 1 and %d.", maxTermSize))
	}
	p, sandbox, err := h.terminal(ctx, req, in.TerminalID, in.Sandbox)
	if err != nil {
		return nil, terminalOKOutput{}, err
	}
	if err := h.cfg.Processes.Resize(ctx, p, sandbox, in.TerminalID, process.PTYSize{Cols: uint32(in.Cols), Rows: uint32(in.Rows)}); err != nil {
		return nil, terminalOKOutput{}, h.terminalError(in.TerminalID, "terminal_resize", err)
	}
	return nil, terminalOKOutput{TerminalID: in.TerminalID, State: string(process.StateRunning)}, nil
}

func (h *Handler) terminalClose(ctx context.Context, req *mcp.CallToolRequest, in terminalIDArgs) (*mcp.CallToolResult, terminalOKOutput, error) {
	p, sandbox, err := h.terminal(ctx, req, in.TerminalID, in.Sandbox)
	if err != nil {
		return nil, terminalOKOutput{}, err
	}
	info, err := h.cfg.Processes.CloseTerminal(ctx, p, sandbox, in.TerminalID)
	if err != nil {
		return nil, terminalOKOutput{}, h.terminalError(in.TerminalID, "terminal_close", err)
	}
	return nil, terminalOKOutput{TerminalID: in.TerminalID, State: string(info.State)}, nil
}

// terminal returns the caller and the sandbox of its terminal id: the one hangar follows it in,
// else (hangar was restarted since it was opened) sandbox, when given, or the token's one
// sandbox.
func (h *Handler) terminal(ctx context.Context, req *mcp.CallToolRequest, id, sandbox string) (auth.Principal, string, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return p, "", errorf("This call carries no hangar token.")
	}
	if id == "" {
		return p, "", errorf("Say which terminal (the terminal_id argument, as terminal_open gave it).")
	}
	if sb, ok := h.cfg.Processes.Locate(p, id); ok {
		return p, sb, nil
	}
	if sandbox == "" {
		sandbox = p.Sandbox
	}
	if sandbox == "" {
		return p, "", errorf(fmt.Sprintf("There is no terminal %s of this token here; if hangar was restarted since it was opened, say which sandbox it is in (the sandbox argument).", id))
	}
	return p, sandbox, nil
}

// terminalError is a terminal tool's failure, in the problem table's words for a terminal.
func (h *Handler) terminalError(id, op string, err error) error {
	return classify(h.log, op, &problem.TerminalError{ID: id, Err: err})
}
