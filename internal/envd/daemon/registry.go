package daemon

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/coder/quartz"
	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
)

// registry is the daemon's table of processes: those running, and those that ended within the
// retention period (Connect still answers them with their start and end events).
type registry struct {
	retention time.Duration
	clock     quartz.Clock // stamps ends; times lifetimes and kill graces
	onRunning func(n int)  // Config.Running; nil: none

	mu      sync.Mutex // protects running, ended, tags and closed
	closed  bool       // killAll was called: processes added now are killed at once
	running map[uint32]*process
	ended   map[uint32]endedProcess
	tags    map[string]bool // tags of running processes and of those being started

	wg sync.WaitGroup // one per process's run goroutine
}

// endedProcess is what is kept of a process that ended.
type endedProcess struct {
	pid uint32
	tag *string
	end *rpc.ProcessEvent_EndEvent
	at  time.Time
}

func newRegistry(retention time.Duration, clock quartz.Clock, onRunning func(n int)) *registry {
	return &registry{retention: retention, clock: clock, onRunning: onRunning, running: map[uint32]*process{}, ended: map[uint32]endedProcess{}, tags: map[string]bool{}}
}

// reserveTag claims tag for a process about to start: a tag names one running process at a
// time, so a process cannot pose as another by copying its tag (hangar finds its background
// processes by tag). release gives it back if the process did not start.
func (r *registry) reserveTag(tag string) (release func(), err error) {
	if tag == "" {
		return func() {}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tags[tag] {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a running process already has the tag %q", tag))
	}
	r.tags[tag] = true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.tags, tag)
	}, nil
}

// add registers p and runs it until it ends, then moves it to the ended table.
func (r *registry) add(p *process, lifetime, killGrace time.Duration) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = p.signal(syscall.SIGKILL)
		p.run(lifetime, killGrace, r.clock)
		return
	}
	r.running[p.pid] = p
	r.runningChangedLocked()
	delete(r.ended, p.pid) // a reused pid must never answer with the previous process's end
	// wg.Go under mu: killAll's Wait, which comes after it sets closed, happens after this Add.
	r.wg.Go(func() {
		p.run(lifetime, killGrace, r.clock)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.running[p.pid] == p {
			delete(r.running, p.pid)
			r.runningChangedLocked()
		}

		r.ended[p.pid] = endedProcess{pid: p.pid, tag: p.tag, end: p.end, at: r.clock.Now()}
	})
	r.mu.Unlock()
}

func (r *registry) runningChangedLocked() {
	if r.onRunning != nil {
		r.onRunning(len(r.running))
	}
}

// find returns the running process sel names, or the end of one that ended recently.
// Neither: a NotFound error.
func (r *registry) find(sel *rpc.ProcessSelector) (*process, *endedProcess, error) {
	if sel == nil || sel.GetSelector() == nil {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("name the process by pid or tag"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	switch s := sel.GetSelector().(type) {
	case *rpc.ProcessSelector_Pid:
		if p, ok := r.running[s.Pid]; ok {
			return p, nil, nil
		}
		if e, ok := r.ended[s.Pid]; ok {
			return nil, &e, nil
		}
		return nil, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no process with pid %d", s.Pid))
	case *rpc.ProcessSelector_Tag:
		for _, p := range r.running {
			if p.tag != nil && *p.tag == s.Tag {
				return p, nil, nil
			}
		}
		var found *endedProcess
		for _, e := range r.ended {
			if e.tag != nil && *e.tag == s.Tag && (found == nil || e.at.After(found.at)) {
				found = &e
			}
		}
		if found != nil {
			return nil, found, nil
		}
		return nil, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no process with tag %q", s.Tag))
	}
	return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("name the process by pid or tag"))
}

// findRunning is find for operations that need a live process.
func (r *registry) findRunning(sel *rpc.ProcessSelector) (*process, error) {
	p, e, err := r.find(sel)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("the process has ended (%s)", e.end.GetStatus()))
	}
	return p, nil
}

func (r *registry) list() []*process {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := make([]*process, 0, len(r.running))
	for _, p := range r.running {
		ps = append(ps, p)
	}
	return ps
}

// pruneLocked forgets ended processes older than the retention; r.mu must be held.
func (r *registry) pruneLocked() {
	cutoff := r.clock.Now().Add(-r.retention)
	for pid, e := range r.ended {
		if e.at.Before(cutoff) {
			delete(r.ended, pid)
		}
	}
}

// killAll kills every running process's group and waits until all are reaped.
func (r *registry) killAll() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	for _, p := range r.list() {
		_ = p.signal(syscall.SIGKILL)
	}
	r.wg.Wait()
}
