package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/quartz"
	"github.com/creack/pty"
	"google.golang.org/protobuf/proto"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// readChunk is the most one read of a process's output returns, hence the largest data event.
const readChunk = 32 << 10

// eventOverhead is what a queued event costs beyond its bytes, so that a flood of tiny events
// is bounded too.
const eventOverhead = 64

// process is one process started by the daemon. Its output is published to its subscribers as
// it is read; with no subscriber it is discarded (the control plane keeps history).
//
// Descriptors: while it runs the daemon holds at most three of its own for it, the read ends
// of its stdout and stderr and the write end of its stdin (none when started with stdin
// false), or one, a pty's master. The protocol sends stdout and stderr apart, so they cannot
// share a pipe. Its pidfd is opened only once its output has ended or it was killed, and Go's
// own is released at start (the daemon reaps it: waitExit). A daemon out of descriptors
// refuses new work (startError) and serves what runs; TestDescriptorsPerProcess counts them.
type process struct {
	pid    uint32
	tag    *string
	config *rpc.ProcessConfig
	cmd    *exec.Cmd
	tty    *os.File   // the pty's master side; nil without a pty
	pipes  []*os.File // the read ends of stdout and stderr; nil with a pty
	log    *slog.Logger

	stdinMu sync.Mutex     // serialises writes to stdin and its closing
	stdin   io.WriteCloser // nil when there is none or it was closed

	killOnce sync.Once
	killed   chan struct{} // closed when a kill is first sent: the pipes are then closed KillGrace after the leader is reaped
	lifetime atomic.Bool   // the kill was the lifetime's

	mu   sync.Mutex // protects subs and end: publishing and subscribing are atomic with respect to each other
	subs map[*queue[*rpc.ProcessEvent]]struct{}
	end  *rpc.ProcessEvent_EndEvent // set once, when the process has ended and its output is drained

	done chan struct{} // closed when end is set

	releaseTag func() // gives the process's tag back to the registry; nil without a tag
}

// subscribe adds a subscriber whose queue holds at most limit bytes: the process's starter
// (q blocking: see queue) or an attached one. When the process has already ended it returns
// nil and the end event.
func (p *process) subscribe(q *queue[*rpc.ProcessEvent]) (*queue[*rpc.ProcessEvent], *rpc.ProcessEvent_EndEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil, p.end
	}
	p.subs[q] = struct{}{}
	return q, nil
}

func (p *process) unsubscribe(q *queue[*rpc.ProcessEvent]) {
	q.cancel() // a publish waiting for room in it goes on
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.subs, q)
}

// publish hands ev to every subscriber. An attached subscriber's queue never makes it wait; the
// starter's makes it wait for room, which slows the process's output down to what the starter
// takes. A subscriber whose queue fails is dropped from the set (its stream then ends with the
// error). Only the output readers call it, each in order, never holding p.mu while waiting.
func (p *process) publish(ev *rpc.ProcessEvent, size int) {
	p.mu.Lock()
	subs := make([]*queue[*rpc.ProcessEvent], 0, len(p.subs))
	for q := range p.subs {
		subs = append(subs, q)
	}
	p.mu.Unlock()
	for _, q := range subs {
		if !q.push(ev, size+eventOverhead) {
			p.mu.Lock()
			if _, ok := p.subs[q]; ok {
				delete(p.subs, q)
				p.log.Warn("process subscriber ended: it fell behind", "pid", p.pid)
			}
			p.mu.Unlock()
		}
	}
}

// finish records the end event and hands it to every subscriber as their last event.
func (p *process) finish(end *rpc.ProcessEvent_EndEvent) {
	if p.releaseTag != nil {
		p.releaseTag() // before anyone hears of the end, so the tag is free by then
	}
	ev := &rpc.ProcessEvent{Event: &rpc.ProcessEvent_End{End: end}}
	p.mu.Lock()
	p.end = end
	subs := p.subs
	p.subs = nil
	close(p.done)
	p.mu.Unlock()
	// Outside the lock: the starter's queue may make the push wait for room.
	for q := range subs {
		q.push(ev, eventOverhead)
		q.close()
	}
}

// signal sends sig to the process's whole process group (envd signals only the process).
func (p *process) signal(sig syscall.Signal) error {
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		p.killOnce.Do(func() { close(p.killed) })
	}
	err := syscall.Kill(-int(p.pid), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the group is gone already: the end event is on its way
	}
	if err != nil {
		return fmt.Errorf("signal process group %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) writeStdin(data []byte) error {
	if p.tty != nil {
		return errors.New("this process runs on a pty: send input as pty input, not stdin")
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return errors.New("this process's stdin is closed or was not enabled (start it with stdin true)")
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("write to the stdin of process %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) writePTY(data []byte) error {
	if p.tty == nil {
		return errors.New("this process has no pty: send input as stdin")
	}
	if _, err := p.tty.Write(data); err != nil {
		return fmt.Errorf("write to the pty of process %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) closeStdin() error {
	if p.tty != nil {
		return errors.New("this process runs on a pty, which has no separate stdin: write Ctrl-D (0x04) to the pty instead")
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil
	if err != nil {
		return fmt.Errorf("close the stdin of process %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) resize(cols, rows uint32) error {
	if p.tty == nil {
		return errors.New("this process has no pty to resize")
	}
	if cols == 0 || rows == 0 || cols > 65535 || rows > 65535 {
		return fmt.Errorf("a pty size needs cols and rows between 1 and 65535, not %dx%d", cols, rows)
	}
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fmt.Errorf("resize the pty of process %d: %w", p.pid, err)
	}
	return nil
}

// run reads the process's output until it is drained and reaps it, then publishes its end.
// lifetime, when positive, bounds how long it may run: then its group is killed. clock times
// the lifetime and the kill grace.
func (p *process) run(lifetime, killGrace time.Duration, clock quartz.Clock) {
	var readers sync.WaitGroup
	if p.tty != nil {
		readers.Go(func() {
			p.read(p.tty, func(b []byte) *rpc.ProcessEvent_DataEvent {
				return &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Pty{Pty: b}}
			})
		})
	} else {
		readers.Go(func() {
			p.read(p.pipes[0], func(b []byte) *rpc.ProcessEvent_DataEvent {
				return &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Stdout{Stdout: b}}
			})
		})
		readers.Go(func() {
			p.read(p.pipes[1], func(b []byte) *rpc.ProcessEvent_DataEvent {
				return &rpc.ProcessEvent_DataEvent{Output: &rpc.ProcessEvent_DataEvent_Stderr{Stderr: b}}
			})
		})
	}

	var timer *quartz.Timer
	if lifetime > 0 {
		timer = clock.AfterFunc(lifetime, func() {
			p.lifetime.Store(true)
			_ = p.signal(syscall.SIGKILL)
		}, "daemon", "lifetime")
	}
	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	// The exit is waited for on a pidfd only once the output has ended or a kill was sent, so
	// that a running process costs no descriptor for it (see process). A leader that exits
	// while descendants still write stays a zombie until they are done: the end event comes
	// after the output anyway. The lifetime, stopped at the leader's reaping, so bounds those
	// descendants too (they were let run for ever).
	select {
	case <-drained:
	case <-p.killed:
	}
	ws, waitErr := waitExit(int(p.pid))
	if timer != nil {
		timer.Stop()
	}

	// As envd: descendants still writing to the pipes keep the stream open. But a killed
	// group's pipes close when its last member dies, and one that escaped the group (setsid)
	// could hold them open for ever, so after a kill they are closed after a grace period.
	select {
	case <-drained:
	case <-p.killed:
		grace := clock.NewTimer(killGrace, "daemon", "kill grace")
		select {
		case <-drained:
		case <-grace.C:
			p.closeOutput()
			<-drained
		}
		grace.Stop()
	}
	p.closeOutput()
	p.stdinMu.Lock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	p.stdinMu.Unlock()

	end := &rpc.ProcessEvent_EndEvent{ExitCode: -1, Exited: ws.Exited(), Status: exitStatus(ws)}
	if ws.Exited() {
		end.ExitCode = int32(ws.ExitStatus())
	}
	if waitErr != nil || end.ExitCode != 0 {
		msg := end.Status
		if waitErr != nil {
			msg = waitErr.Error()
		}
		if p.lifetime.Load() {
			msg = fmt.Sprintf("%s (the process outlived its lifetime of %s and was killed)", msg, lifetime)
		}
		end.Error = &msg
	}
	p.log.Info("process ended", "pid", p.pid, "status", end.Status)
	p.finish(end)
}

// read publishes every read of r at once, as its own data event, until r ends.
//
// It holds a buffer only while reads return data, not while it waits: it takes one from
// readBufs when r is readable (every output descriptor is on the runtime's poller: see
// poll.go) and gives it back when a read finds nothing, before it waits again. A quiet
// process, which is most of them most of the time, costs no buffer; with a buffer each for
// good, 512 processes held 32 MiB (bench/README.md, issue 11).
func (p *process) read(r *os.File, wrap func([]byte) *rpc.ProcessEvent_DataEvent) {
	rc, err := r.SyscallConn()
	if err != nil {
		return // closed already
	}
	var (
		buf  *[]byte // kept while reads return data, given back before a wait
		data []byte
		n    int
		rerr error
	)
	defer func() {
		if buf != nil {
			giveReadBuf(buf)
		}
	}()
	readable := func(fd uintptr) bool {
		if buf == nil {
			buf = takeReadBuf()
		}
		for {
			n, rerr = syscall.Read(int(fd), *buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			giveReadBuf(buf)
			buf = nil
			return false // nothing to read: wait on the poller
		}
		if n > 0 {
			data = append([]byte(nil), (*buf)[:n]...)
		}
		return true
	}
	for {
		data = nil
		err := rc.Read(readable)
		if len(data) > 0 {
			p.publish(&rpc.ProcessEvent{Event: &rpc.ProcessEvent_Data{Data: wrap(data)}}, len(data))
		}
		if err != nil || rerr != nil || n <= 0 {
			return // closed by closeOutput, EOF, or EIO from a pty whose other side closed
		}
	}
}

// readBufs holds the buffers of reads (readChunk bytes each); readBufsHeld counts those taken
// and not yet given back.
var (
	readBufs     = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}
	readBufsHeld atomic.Int64
)

func takeReadBuf() *[]byte {
	readBufsHeld.Add(1)
	return readBufs.Get().(*[]byte)
}

func giveReadBuf(b *[]byte) {
	readBufs.Put(b)
	readBufsHeld.Add(-1)
}

func (p *process) closeOutput() {
	if p.tty != nil {
		_ = p.tty.Close()
	}
	for _, f := range p.pipes {
		_ = f.Close()
	}
}

// info describes the process for List.
func (p *process) info() *rpc.ProcessInfo {
	return &rpc.ProcessInfo{Config: proto.CloneOf(p.config), Pid: p.pid, Tag: p.tag}
}
