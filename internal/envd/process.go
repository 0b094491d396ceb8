package envd

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"connectrpc.com/connect"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// StartRequest is a command to run in the sandbox.
type StartRequest struct {
	Cmd  string   // the program, looked up in PATH when it has no slash
	Args []string // its arguments
	// Envs are added to the daemon's environment (PATH, HOME, USER, ...), overriding it.
	Envs map[string]string
	// Cwd is the working directory; empty: the daemon's default. A missing directory is
	// ErrInvalidArgument.
	Cwd string
	// Stdin gives the process a standard input pipe (SendInput, CloseStdin); false gives it
	// /dev/null, so a command waiting for input sees end of file at once.
	Stdin bool
	// Tag names the process for Connect, List and the input calls.
	Tag string
	// PTY, when set, runs the process on a pseudo-terminal of this size; its output then
	// comes as EventPTY (stdout and stderr together, as a terminal shows them).
	PTY *PTYSize
	// Lifetime, when positive, bounds how long the process may run (Connect-Timeout-Ms):
	// then the daemon kills it and the stream ends with ErrDeadlineExceeded instead of the end
	// event (hangar's daemon after all the output, E2B's at the deadline). Whole milliseconds.
	Lifetime time.Duration
}

// PTYSize is a terminal size in character cells.
type PTYSize struct {
	Cols, Rows uint32
}

// EventKind says what an Event carries.
type EventKind int

// The kinds of process events.
const (
	EventStart     EventKind = iota + 1 // PID: the process started (first; Start and Connect consume it)
	EventStdout                         // Data: bytes read from stdout
	EventStderr                         // Data: bytes read from stderr
	EventPTY                            // Data: bytes read from the pty
	EventKeepalive                      // nothing was sent for the keepalive interval
	EventEnd                            // Exit: the process ended (last)
)

func (k EventKind) String() string {
	switch k {
	case EventStart:
		return "start"
	case EventStdout:
		return "stdout"
	case EventStderr:
		return "stderr"
	case EventPTY:
		return "pty"
	case EventKeepalive:
		return "keepalive"
	case EventEnd:
		return "end"
	}
	return "unknown(" + strconv.Itoa(int(k)) + ")"
}

// Event is one event of a process's stream.
type Event struct {
	Kind EventKind
	PID  uint32 // EventStart
	Data []byte // EventStdout, EventStderr, EventPTY: exactly the bytes of one read
	Exit *Exit  // EventEnd
}

// Exit is how a process ended.
type Exit struct {
	Code   int    // exit status; -1 when a signal killed it
	Exited bool   // true when it exited by itself, false when a signal killed it
	Status string // e.g. "exit status 1", "signal: killed"
	Error  string // the daemon's error text, if any
}

// eventFromProto converts a wire event; ok is false for an event this client does not know
// (a newer daemon's), which callers skip.
func eventFromProto(ev *rpc.ProcessEvent) (Event, bool) {
	switch e := ev.GetEvent().(type) {
	case *rpc.ProcessEvent_Start:
		return Event{Kind: EventStart, PID: e.Start.GetPid()}, true
	case *rpc.ProcessEvent_Data:
		switch o := e.Data.GetOutput().(type) {
		case *rpc.ProcessEvent_DataEvent_Stdout:
			return Event{Kind: EventStdout, Data: o.Stdout}, true
		case *rpc.ProcessEvent_DataEvent_Stderr:
			return Event{Kind: EventStderr, Data: o.Stderr}, true
		case *rpc.ProcessEvent_DataEvent_Pty:
			return Event{Kind: EventPTY, Data: o.Pty}, true
		}
	case *rpc.ProcessEvent_End:
		return Event{Kind: EventEnd, Exit: &Exit{
			Code:   int(e.End.GetExitCode()),
			Exited: e.End.GetExited(),
			Status: e.End.GetStatus(),
			Error:  e.End.GetError(),
		}}, true
	case *rpc.ProcessEvent_Keepalive:
		return Event{Kind: EventKeepalive}, true
	}
	return Event{}, false
}

// ProcessStream is the stream of a started or attached process. One goroutine at a time may
// call Next.
type ProcessStream struct {
	ctx   context.Context
	op    string
	pid   uint32
	next  func() (*rpc.ProcessEvent, error) // nil event and nil error: the stream ended cleanly
	close func() error
	ended bool
}

// PID is the process's id in the sandbox.
func (s *ProcessStream) PID() uint32 { return s.pid }

// Next returns the next event: output, keepalives, and the end event last. After the end
// event it returns io.EOF. A stream that breaks before the end returns an error (ErrNoEnd
// when it ended cleanly; ErrDeadlineExceeded when the daemon killed the process for its
// Lifetime).
func (s *ProcessStream) Next() (Event, error) {
	for {
		if s.ended {
			return Event{}, io.EOF
		}
		ev, err := s.next()
		if err != nil {
			return Event{}, wrapStreamErr(s.ctx, s.op, err)
		}
		if ev == nil {
			return Event{}, &Error{Op: s.op, Code: connect.CodeUnknown, Message: "the daemon closed the stream without an end event", kind: ErrNoEnd}
		}
		e, ok := eventFromProto(ev)
		if !ok || e.Kind == EventStart {
			continue
		}
		if e.Kind == EventEnd {
			s.ended = true
		}
		return e, nil
	}
}

// Close ends the stream. The process keeps running.
func (s *ProcessStream) Close() error { return s.close() }

type serverStream[T any] interface {
	Receive() bool
	Msg() *T
	Err() error
	Close() error
}

// openProcessStream reads the first event, which must be start, and returns the stream.
func openProcessStream[T any](ctx context.Context, op string, st serverStream[T], event func(*T) *rpc.ProcessEvent) (*ProcessStream, error) {
	next := func() (*rpc.ProcessEvent, error) {
		if !st.Receive() {
			return nil, st.Err()
		}
		return event(st.Msg()), nil
	}
	ev, err := next()
	if err == nil && ev == nil {
		err = connect.NewError(connect.CodeUnknown, fmt.Errorf("%w: the stream ended before its start event", errUnexpected))
	}
	if err != nil {
		st.Close()
		return nil, wrapErr(ctx, op, err)
	}
	start, ok := ev.GetEvent().(*rpc.ProcessEvent_Start)
	if !ok {
		st.Close()
		return nil, &Error{Op: op, Code: connect.CodeInternal, Message: fmt.Sprintf("the first event was %T, not start", ev.GetEvent()), kind: ErrDaemon, cause: errUnexpected}
	}
	return &ProcessStream{ctx: ctx, op: op, pid: start.Start.GetPid(), next: next, close: st.Close}, nil
}

// Start runs a command and returns its stream once the daemon has started it (PID is set).
// Cancelling ctx ends the stream, not the process: Signal it to stop it.
func (c *Client) Start(ctx context.Context, r StartRequest) (*ProcessStream, error) {
	msg := &rpc.StartRequest{
		Process: &rpc.ProcessConfig{Cmd: r.Cmd, Args: r.Args, Envs: r.Envs},
		Stdin:   &r.Stdin,
	}
	if r.Cwd != "" {
		msg.Process.Cwd = &r.Cwd
	}
	if r.Tag != "" {
		msg.Tag = &r.Tag
	}
	if r.PTY != nil {
		msg.Pty = &rpc.PTY{Size: &rpc.PTY_Size{Cols: r.PTY.Cols, Rows: r.PTY.Rows}}
	}
	req := connect.NewRequest(msg)
	if r.Lifetime > 0 {
		req.Header().Set("Connect-Timeout-Ms", strconv.FormatInt(max(r.Lifetime.Milliseconds(), 1), 10))
	}
	// connect-go would send ctx's deadline as Connect-Timeout-Ms, which envd takes as the
	// process's lifetime: the call runs on a context without the deadline, cancelled with ctx.
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	release := func() { stop(); cancel() }
	st, err := c.proc.Start(callCtx, req)
	if err != nil {
		release()
		return nil, wrapErr(ctx, "start process", err)
	}
	ps, err := openProcessStream(ctx, "start process "+r.Cmd, st, (*rpc.StartResponse).GetEvent)
	if err != nil {
		release()
		return nil, err
	}
	ps.close = func() error {
		err := st.Close()
		release()
		return err
	}
	return ps, nil
}

// Selector names a process: by PID, or by Tag when PID is zero.
type Selector struct {
	PID uint32
	Tag string
}

// ByPID selects the process with this pid.
func ByPID(pid uint32) Selector { return Selector{PID: pid} }

// ByTag selects the process started with this tag.
func ByTag(tag string) Selector { return Selector{Tag: tag} }

func (s Selector) proto() *rpc.ProcessSelector {
	if s.PID != 0 {
		return &rpc.ProcessSelector{Selector: &rpc.ProcessSelector_Pid{Pid: s.PID}}
	}
	return &rpc.ProcessSelector{Selector: &rpc.ProcessSelector_Tag{Tag: s.Tag}}
}

func (s Selector) String() string {
	if s.PID != 0 {
		return "pid " + strconv.FormatUint(uint64(s.PID), 10)
	}
	return "tag " + strconv.Quote(s.Tag)
}

// Connect attaches to a running process: its output from now on, then its end. A process that
// ended in the last 30 seconds answers with its end at once; an unknown one is ErrNotFound.
func (c *Client) Connect(ctx context.Context, sel Selector) (*ProcessStream, error) {
	st, err := c.proc.Connect(ctx, connect.NewRequest(&rpc.ConnectRequest{Process: sel.proto()}))
	if err != nil {
		return nil, wrapErr(ctx, "connect to process "+sel.String(), err)
	}
	return openProcessStream(ctx, "connect to process "+sel.String(), st, (*rpc.ConnectResponse).GetEvent)
}

// ProcessInfo describes a running process.
type ProcessInfo struct {
	PID  uint32
	Tag  string
	Cmd  string
	Args []string
	Envs map[string]string
	Cwd  string
}

// List returns the running processes.
func (c *Client) List(ctx context.Context) ([]ProcessInfo, error) {
	res, err := c.proc.List(ctx, connect.NewRequest(&rpc.ListRequest{}))
	if err != nil {
		return nil, wrapErr(ctx, "list processes", err)
	}
	var out []ProcessInfo
	for _, p := range res.Msg.GetProcesses() {
		out = append(out, ProcessInfo{
			PID: p.GetPid(), Tag: p.GetTag(),
			Cmd: p.GetConfig().GetCmd(), Args: p.GetConfig().GetArgs(), Envs: p.GetConfig().GetEnvs(), Cwd: p.GetConfig().GetCwd(),
		})
	}
	return out, nil
}

// SendInput writes data to the process's stdin.
func (c *Client) SendInput(ctx context.Context, sel Selector, data []byte) error {
	_, err := c.proc.SendInput(ctx, connect.NewRequest(&rpc.SendInputRequest{
		Process: sel.proto(), Input: &rpc.ProcessInput{Input: &rpc.ProcessInput_Stdin{Stdin: data}},
	}))
	return wrapErr(ctx, "send input to process "+sel.String(), err)
}

// SendPTYInput writes data to the process's pseudo-terminal (as typed keys).
func (c *Client) SendPTYInput(ctx context.Context, sel Selector, data []byte) error {
	_, err := c.proc.SendInput(ctx, connect.NewRequest(&rpc.SendInputRequest{
		Process: sel.proto(), Input: &rpc.ProcessInput{Input: &rpc.ProcessInput_Pty{Pty: data}},
	}))
	return wrapErr(ctx, "send pty input to process "+sel.String(), err)
}

// CloseStdin closes the process's stdin: it reads end of file. (A pty process: send 0x04.)
func (c *Client) CloseStdin(ctx context.Context, sel Selector) error {
	_, err := c.proc.CloseStdin(ctx, connect.NewRequest(&rpc.CloseStdinRequest{Process: sel.proto()}))
	return wrapErr(ctx, "close stdin of process "+sel.String(), err)
}

// Signal is a signal Signal can send.
type Signal int

// The signals a daemon accepts.
const (
	SIGTERM Signal = 15
	SIGKILL Signal = 9
)

// Signal sends sig. hangar's daemon signals the process's whole process group; E2B's envd
// only the process.
func (c *Client) Signal(ctx context.Context, sel Selector, sig Signal) error {
	var s rpc.Signal
	switch sig {
	case SIGTERM:
		s = rpc.Signal_SIGNAL_SIGTERM
	case SIGKILL:
		s = rpc.Signal_SIGNAL_SIGKILL
	default:
		return &Error{Op: "signal process " + sel.String(), Code: connect.CodeInvalidArgument, Message: fmt.Sprintf("only SIGTERM and SIGKILL can be sent, not %d", sig), kind: ErrInvalidArgument}
	}
	_, err := c.proc.SendSignal(ctx, connect.NewRequest(&rpc.SendSignalRequest{Process: sel.proto(), Signal: s}))
	return wrapErr(ctx, "signal process "+sel.String(), err)
}

// ResizePTY changes the size of the process's pseudo-terminal.
func (c *Client) ResizePTY(ctx context.Context, sel Selector, size PTYSize) error {
	_, err := c.proc.Update(ctx, connect.NewRequest(&rpc.UpdateRequest{
		Process: sel.proto(), Pty: &rpc.PTY{Size: &rpc.PTY_Size{Cols: size.Cols, Rows: size.Rows}},
	}))
	return wrapErr(ctx, "resize the pty of process "+sel.String(), err)
}

// InputStream writes a process's input in order over one client stream (StreamInput).
type InputStream struct {
	ctx context.Context
	op  string
	st  *connect.ClientStreamForClient[rpc.StreamInputRequest, rpc.StreamInputResponse]
	pty bool
}

// StreamInput opens an input stream to the process's stdin, or to its pty when pty is true.
func (c *Client) StreamInput(ctx context.Context, sel Selector, pty bool) (*InputStream, error) {
	op := "stream input to process " + sel.String()
	st := c.proc.StreamInput(ctx)
	if err := st.Send(&rpc.StreamInputRequest{Event: &rpc.StreamInputRequest_Start{Start: &rpc.StreamInputRequest_StartEvent{Process: sel.proto()}}}); err != nil {
		if _, cerr := st.CloseAndReceive(); cerr != nil {
			err = cerr
		}
		return nil, wrapErr(ctx, op, err)
	}
	return &InputStream{ctx: ctx, op: op, st: st, pty: pty}, nil
}

// Write sends p as one piece of input. An error the daemon answered may only show at Close.
func (s *InputStream) Write(p []byte) (int, error) {
	in := &rpc.ProcessInput{Input: &rpc.ProcessInput_Stdin{Stdin: p}}
	if s.pty {
		in = &rpc.ProcessInput{Input: &rpc.ProcessInput_Pty{Pty: p}}
	}
	if err := s.st.Send(&rpc.StreamInputRequest{Event: &rpc.StreamInputRequest_Data{Data: &rpc.StreamInputRequest_DataEvent{Input: in}}}); err != nil {
		// The daemon ended the stream: its answer says why.
		if _, cerr := s.st.CloseAndReceive(); cerr != nil {
			err = cerr
		}
		return 0, wrapErr(s.ctx, s.op, err)
	}
	return len(p), nil
}

// Close ends the stream and returns the daemon's answer. It does not close the process's
// stdin (CloseStdin does).
func (s *InputStream) Close() error {
	_, err := s.st.CloseAndReceive()
	return wrapErr(s.ctx, s.op, err)
}
