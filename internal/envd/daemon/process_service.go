package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// processService implements process.Process.
type processService struct {
	d *Daemon
}

const lifetimeKey ctxKey = iota + 100

// liftLifetime takes Connect-Timeout-Ms off a Start request before connect-go sees it: envd
// uses it as the process's lifetime, and connect-go would also end the stream at that moment,
// possibly before the last output. hangar's Start stream ends with deadline_exceeded too, but
// only once the killed process's output is all sent.
func liftLifetime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("Connect-Timeout-Ms")
		if v == "" || r.URL.Path != "/process.Process/Start" {
			next.ServeHTTP(w, r)
			return
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > 1e12 {
			writeError(w, r, http.StatusBadRequest, fmt.Sprintf("Connect-Timeout-Ms must be a number of milliseconds, not %q", v))
			return
		}
		r.Header.Del("Connect-Timeout-Ms")
		ctx := context.WithValue(r.Context(), lifetimeKey, time.Duration(ms)*time.Millisecond)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// keepaliveInterval is the request's Keepalive-Ping-Interval (seconds), else the default.
func (d *Daemon) keepaliveInterval(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return d.cfg.KeepaliveInterval
}

// errNulInPath is returned for a path with a NUL byte, which no file name can hold.
var errNulInPath = errors.New("a path cannot contain a NUL byte")

// resolvePath makes p absolute: "~" and "~/..." are the user's home, a relative path is
// relative to the default working directory, else to the user's home. A path the file
// system cannot hold (a NUL byte) is errNulInPath.
func (d *Daemon) resolvePath(id *identity, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q: %w", p, errNulInPath)
	}
	base := d.auth.get().workdir
	if base == "" {
		base = id.home
	}
	switch {
	case p == "" || p == ".":
		return filepath.Clean(base), nil
	case p == "~":
		return id.home, nil
	case len(p) > 1 && p[:2] == "~/":
		return filepath.Join(id.home, p[2:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	return filepath.Join(base, p), nil
}

func (s *processService) List(_ context.Context, _ *connect.Request[rpc.ListRequest]) (*connect.Response[rpc.ListResponse], error) {
	ps := s.d.procs.list()
	slices.SortFunc(ps, func(a, b *process) int { return int(a.pid) - int(b.pid) })
	res := &rpc.ListResponse{}
	for _, p := range ps {
		res.Processes = append(res.Processes, p.info())
	}
	return connect.NewResponse(res), nil
}

func (s *processService) Start(ctx context.Context, req *connect.Request[rpc.StartRequest], stream *connect.ServerStream[rpc.StartResponse]) error {
	id := identityFrom(ctx)
	if id == nil {
		return connect.NewError(connect.CodeInternal, errors.New("the request has no user"))
	}
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("start needs process.cmd, the program to run"))
	}
	cmd, err := s.d.command(id, cfg, req.Msg.GetPty() != nil)
	if err != nil {
		return err
	}
	lifetime, _ := ctx.Value(lifetimeKey).(time.Duration)
	release, err := s.d.procs.reserveTag(req.Msg.GetTag())
	if err != nil {
		return err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()

	p := &process{
		tag:    req.Msg.Tag,
		config: cfg,
		cmd:    cmd,
		log:    s.d.log,
		subs:   map[*queue[*rpc.ProcessEvent]]struct{}{},
		done:   make(chan struct{}),
		killed: make(chan struct{}),
	}
	q, _ := p.subscribe(newBlockingQueue[*rpc.ProcessEvent](s.d.cfg.StarterQueueBytes, s.d.cfg.StarterStall, s.d.cfg.Clock))

	if size := req.Msg.GetPty(); size != nil {
		err = startOnPTY(p, size.GetSize(), id)
	} else {
		err = startOnPipes(p, req.Msg.Stdin == nil || req.Msg.GetStdin(), id)
	}
	if err != nil {
		return s.d.withOpenFiles(err)
	}
	p.pid = uint32(cmd.Process.Pid)
	// The daemon reaps the process itself (waitExit): Go's handle, a pidfd held until Wait,
	// would be one more descriptor for as long as it runs.
	_ = cmd.Process.Release()
	// The start event is queued before the output readers exist, so it is always first.
	q.push(&rpc.ProcessEvent{Event: &rpc.ProcessEvent_Start{Start: &rpc.ProcessEvent_StartEvent{Pid: p.pid}}}, eventOverhead)
	s.d.log.Info("process started", "pid", p.pid, "cmd", cfg.GetCmd(), "user", id.name, "lifetime", lifetime)
	started = true // the tag is the process's now, until it ends
	p.releaseTag = release
	s.d.procs.add(p, lifetime, s.d.cfg.KillGrace)

	defer p.unsubscribe(q)
	return drain(s.d, ctx, q, s.d.keepaliveInterval(req.Header()),
		func(ev *rpc.ProcessEvent) error {
			// As E2B's envd (where connect-go's deadline ends the stream), a process killed
			// for its lifetime ends its Start stream with deadline_exceeded, after all its
			// output, instead of the end event; its SDKs raise a timeout error on that code.
			if ev.GetEnd() != nil && p.lifetime.Load() {
				return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the process outlived its lifetime of %s and was killed", lifetime))
			}
			return stream.Send(&rpc.StartResponse{Event: ev})
		},
		func() error { return stream.Send(&rpc.StartResponse{Event: keepaliveEvent()}) })
}

// command is the command a Start request asks for, as id: in its working directory (which must
// exist), with a small fixed environment (PATH, HOME, USER, LOGNAME; TERM on a pty), then the
// daemon's default envs, then the request's, each in name order.
func (d *Daemon) command(id *identity, cfg *rpc.ProcessConfig, onPTY bool) (*exec.Cmd, error) {
	cwd, err := d.resolvePath(id, cfg.GetCwd())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd: %w", err))
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the working directory %q does not exist or is not a directory", cwd))
	}
	set := d.auth.get()
	cmd := exec.Command(cfg.GetCmd(), cfg.GetArgs()...)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + id.home, "USER=" + id.name, "LOGNAME=" + id.name}
	if onPTY {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	}
	for _, k := range slices.Sorted(maps.Keys(set.envs)) {
		cmd.Env = append(cmd.Env, k+"="+set.envs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.GetEnvs())) {
		cmd.Env = append(cmd.Env, k+"="+cfg.GetEnvs()[k])
	}
	return cmd, nil
}

// startOnPTY starts p.cmd as id on a new pseudo-terminal of size (80x24 when a side is 0), the
// leader of a new session and so of its own process group. The pty's master is on the
// runtime's poller (see pollable), so reading it holds no thread.
func startOnPTY(p *process, size *rpc.PTY_Size, id *identity) error {
	ws := &pty.Winsize{Cols: uint16(min(size.GetCols(), 65535)), Rows: uint16(min(size.GetRows(), 65535))}
	if ws.Cols == 0 || ws.Rows == 0 {
		ws.Cols, ws.Rows = 80, 24
	}
	master, tty, err := pty.Open()
	if err != nil {
		return setupError("open a pty", err)
	}
	defer tty.Close() // the child has its own copy once started
	if master, err = pollable(master); err != nil {
		return setupError("open a pty", err)
	}
	if err := pty.Setsize(master, ws); err != nil {
		master.Close()
		return connect.NewError(connect.CodeInternal, fmt.Errorf("size the pty: %w", err))
	}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	// Setctty makes the child's fd 0 (Ctty), the tty, its controlling terminal.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Credential: id.credential()}
	if err := p.cmd.Start(); err != nil {
		master.Close()
		return startError(fmt.Sprintf("start %q on a pty", p.config.GetCmd()), err)
	}
	p.tty = master
	return nil
}

// startOnPipes starts p.cmd as id in its own process group, its stdout and stderr on pipes
// (p.pipes) and, when withStdin, its stdin on p.stdin. On failure nothing stays open.
func startOnPipes(p *process, withStdin bool, id *identity) error {
	cmd := p.cmd
	outR, outW, err := os.Pipe()
	if err != nil {
		return setupError("create stdout pipe", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return setupError("create stderr pipe", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if withStdin {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return setupError("create stdin pipe", err)
		}
		p.stdin = stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: id.credential()}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if p.stdin != nil {
			p.stdin.Close()
		}
		return startError(fmt.Sprintf("start %q", p.config.GetCmd()), err)
	}
	p.pipes = []*os.File{outR, errR}
	return nil
}

func keepaliveEvent() *rpc.ProcessEvent {
	return &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Keepalive{Keepalive: &rpc.ProcessEvent_KeepAlive{}}}
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[rpc.ConnectRequest], stream *connect.ServerStream[rpc.ConnectResponse]) error {
	send := func(ev *rpc.ProcessEvent) error { return stream.Send(&rpc.ConnectResponse{Event: ev}) }
	startEv := func(pid uint32) *rpc.ProcessEvent {
		return &rpc.ProcessEvent{Event: &rpc.ProcessEvent_Start{Start: &rpc.ProcessEvent_StartEvent{Pid: pid}}}
	}
	endEv := func(end *rpc.ProcessEvent_EndEvent) *rpc.ProcessEvent {
		return &rpc.ProcessEvent{Event: &rpc.ProcessEvent_End{End: end}}
	}
	p, ended, err := s.d.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	if ended != nil {
		if err := send(startEv(ended.pid)); err != nil {
			return err
		}
		return send(endEv(ended.end))
	}
	q, end := p.subscribe(newQueue[*rpc.ProcessEvent](s.d.cfg.SubscriberQueueBytes, s.d.cfg.Clock))
	if end != nil {
		if err := send(startEv(p.pid)); err != nil {
			return err
		}
		return send(endEv(end))
	}
	defer p.unsubscribe(q)
	if err := send(startEv(p.pid)); err != nil {
		return err
	}
	return drain(s.d, ctx, q, s.d.keepaliveInterval(req.Header()), send,
		func() error { return send(keepaliveEvent()) })
}

// drain sends what q delivers until it is done or failed, the client goes away or the daemon
// closes, and a keepalive whenever nothing was sent for interval. It is the only goroutine
// sending on its stream.
func drain[T any](d *Daemon, ctx context.Context, q *queue[T], interval time.Duration, send func(T) error, keepalive func() error) error {
	timer := d.cfg.Clock.NewTimer(interval, "daemon", "keepalive")
	defer timer.Stop()
	for {
		items, done, err := q.take()
		if err != nil {
			return connect.NewError(connect.CodeResourceExhausted, err)
		}
		for _, it := range items {
			if err := send(it); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			timer.Reset(interval, "daemon", "keepalive")
		}
		if done {
			return nil
		}
		select {
		case <-q.ready():
		case <-timer.C:
			if err := keepalive(); err != nil {
				return err
			}
			timer.Reset(interval, "daemon", "keepalive")
		case <-ctx.Done():
			return ctx.Err()
		case <-d.base.Done():
			return connect.NewError(connect.CodeUnavailable, errors.New("the daemon is shutting down"))
		}
	}
}

func (s *processService) Update(_ context.Context, req *connect.Request[rpc.UpdateRequest]) (*connect.Response[rpc.UpdateResponse], error) {
	p, err := s.d.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetPty() == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("update needs pty.size, the new terminal size"))
	}
	size := req.Msg.GetPty().GetSize()
	if err := p.resize(size.GetCols(), size.GetRows()); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&rpc.UpdateResponse{}), nil
}

// writeInput writes in to p; a process that cannot take it is a failed precondition.
func writeInput(p *process, in *rpc.ProcessInput) error {
	var err error
	switch v := in.GetInput().(type) {
	case *rpc.ProcessInput_Stdin:
		err = p.writeStdin(v.Stdin)
	case *rpc.ProcessInput_Pty:
		err = p.writePTY(v.Pty)
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input needs stdin or pty bytes"))
	}
	if err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return nil
}

func (s *processService) SendInput(_ context.Context, req *connect.Request[rpc.SendInputRequest]) (*connect.Response[rpc.SendInputResponse], error) {
	p, err := s.d.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&rpc.SendInputResponse{}), nil
}

func (s *processService) StreamInput(_ context.Context, stream *connect.ClientStream[rpc.StreamInputRequest]) (*connect.Response[rpc.StreamInputResponse], error) {
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *rpc.StreamInputRequest_Start:
			if p != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an input stream names its process once, in its first message"))
			}
			found, err := s.d.procs.findRunning(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *rpc.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an input stream must start with a start message naming the process"))
			}
			if err := writeInput(p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *rpc.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an input stream message needs start, data or keepalive"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&rpc.StreamInputResponse{}), nil
}

func (s *processService) SendSignal(_ context.Context, req *connect.Request[rpc.SendSignalRequest]) (*connect.Response[rpc.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case rpc.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	case rpc.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL, not %v", req.Msg.GetSignal()))
	}
	p, err := s.d.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&rpc.SendSignalResponse{}), nil
}

func (s *processService) CloseStdin(_ context.Context, req *connect.Request[rpc.CloseStdinRequest]) (*connect.Response[rpc.CloseStdinResponse], error) {
	p, err := s.d.procs.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&rpc.CloseStdinResponse{}), nil
}
