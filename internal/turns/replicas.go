package turns

import (
	"context"
	"errors"
	"strings"

	"github.com/hangar-dev/hangar/internal/store"
)

// Replicas connects the turns of several hangar replicas on one database (docs/replicas.md).
// Nil in Config: this Service is the only one: it runs and watches every turn.
type Replicas interface {
	// Owns says whether this replica watches the turns of sandbox: it holds the sandbox's
	// lease, or takes it because nobody holds it (or its holder let it expire).
	Owns(ctx context.Context, sandbox string) bool
	// Appended tells the other replicas that events were appended to a session and, when
	// jobID is set, to its job; their readers then read them from the store.
	Appended(ctx context.Context, sessionID, jobID string)
	// Queued tells the other replicas that a turn is queued in a sandbox this replica does not
	// own: its owner runs it (TakeTurn).
	Queued(ctx context.Context, turnID string)
}

// watcher is a turn's watcher goroutine: the sandbox it runs in, and how to stop it.
type watcher struct {
	sandbox string
	cancel  context.CancelFunc
	// poke wakes the watcher from its wait for the next poll (a cancel was sent: the turn's
	// end is near); it holds one wake.
	poke chan struct{}
}

// poke wakes turnID's watcher, if this replica runs one, to read the turn now.
func (s *Service) poke(turnID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watching[turnID]; w != nil {
		select {
		case w.poke <- struct{}{}:
		default: // a wake is pending already
		}
	}
}

// pokes is the channel that wakes turnID's watcher (nil, which never wakes, when it has none).
func (s *Service) pokes(turnID string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.watching[turnID]; w != nil {
		return w.poke
	}
	return nil
}

// owns reports whether this replica runs and watches the turns of sandbox.
func (s *Service) owns(ctx context.Context, sandbox string) bool {
	return s.cfg.Replicas == nil || s.cfg.Replicas.Owns(ctx, sandbox)
}

// spawn runs fn as the watcher of turnID in sandbox, under a context Release and Close cancel,
// unless the turn has a watcher already or the Service is closed (then it reports false).
func (s *Service) spawn(turnID, sandbox string, fn func(ctx context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.watching[turnID] != nil {
		return false
	}
	ctx, cancel := context.WithCancel(s.ctx)
	w := &watcher{sandbox: sandbox, cancel: cancel, poke: make(chan struct{}, 1)}
	s.watching[turnID] = w
	s.wg.Add(1) // under mu, so Close's Wait never races it
	go func() {
		defer s.wg.Done()
		defer func() {
			cancel()
			s.mu.Lock()
			if s.watching[turnID] == w {
				delete(s.watching, turnID)
			}
			s.mu.Unlock()
		}()
		fn(ctx)
	}()
	return true
}

// Wake wakes this replica's readers of a session's (and job's) events: another replica
// appended some.
func (s *Service) Wake(sessionID, jobID string) {
	keys := []string{sessionKey(sessionID)}
	if jobID != "" {
		keys = append(keys, jobKey(jobID))
	}
	s.woken.wake(keys...)
}

// WakeAll wakes every reader of events on this replica, to read the store again: what another
// replica announced while this one was not listening is there.
func (s *Service) WakeAll() {
	s.woken.wakeAll()
}

// TakeTurn runs a turn another replica queued in a sandbox this one owns, unless it runs or
// ended already.
func (s *Service) TakeTurn(ctx context.Context, turnID string) {
	t, err := s.cfg.Store.GetTurn(ctx, turnID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("take a queued turn", "turn", turnID, "err", err)
		}
		return
	}
	if t.State != store.TurnQueued {
		return
	}
	se, err := s.cfg.Store.GetSession(ctx, "", t.SessionID)
	if err != nil {
		s.log.Warn("take a queued turn", "turn", turnID, "err", err)
		return
	}
	gen := s.released(se.Sandbox)
	if !s.owns(ctx, se.Sandbox) {
		return
	}
	s.spawn(t.ID, se.Sandbox, func(ctx context.Context) { s.run(ctx, se, t, gen) })
}

// TakeQueued runs the queued turns of the sandboxes this replica owns that nobody runs: a
// notification of them may have been missed while this replica was not listening.
func (s *Service) TakeQueued(ctx context.Context) {
	ts, err := s.cfg.Store.ListActiveTurns(ctx)
	if err != nil {
		s.log.Warn("look for queued turns", "err", err)
		return
	}
	for _, t := range ts {
		if t.State == store.TurnQueued {
			s.TakeTurn(ctx, t.ID)
		}
	}
}

// ResumeSandbox is Resume for the sandbox name, whose lease this replica just gained (handed
// over, or taken from a replica that died): its running turns are watched from their saved read
// positions, its queued ones run here unless their launch began (they fail then: the previous
// owner may have launched a harness it did not record).
func (s *Service) ResumeSandbox(ctx context.Context, name string) error {
	gen := s.released(name)
	return s.resume(ctx, func(sandbox string) (int, bool) { return gen, sandbox == name })
}

// Release stops watching the turns of the sandbox name (they run on): another replica holds
// its lease now and watches them from their saved read positions. No turn starts there from
// now on, and Release waits for the starts under way to be recorded (running, or failed), so
// that a turn still queued after it was started by nobody: the new owner runs it.
func (s *Service) Release(name string) {
	s.mu.Lock()
	s.releases[name]++
	var n int
	for _, w := range s.watching {
		if w.sandbox == name {
			w.cancel()
			n++
		}
	}
	for s.starting[name] > 0 {
		s.started.Wait()
	}
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("stopped watching the turns of a sandbox another replica owns now", "sandbox", name, "count", n)
	}
}

// released is how many times the sandbox name was released. Read before asking whether this
// replica owns the sandbox, it lets a turn's start see a release that came in between.
func (s *Service) released(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releases[name]
}

// beginStart counts a turn start under way in sandbox, for Release to wait for; false, and
// nothing may start, when the sandbox was released since released said gen, or ctx (the
// turn's watcher's) ended.
func (s *Service) beginStart(ctx context.Context, sandbox string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.releases[sandbox] != gen || ctx.Err() != nil {
		return false
	}
	s.starting[sandbox]++
	return true
}

// endStart says a start that beginStart counted is recorded.
func (s *Service) endStart(sandbox string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting[sandbox]--; s.starting[sandbox] == 0 {
		delete(s.starting, sandbox)
	}
	s.started.Broadcast()
}

// announce tells the other replicas that events were appended.
func (s *Service) announce(ctx context.Context, a store.EventAppend) {
	if s.cfg.Replicas != nil {
		s.cfg.Replicas.Appended(ctx, a.SessionID, a.JobID)
	}
}

// EventsArg and ParseEventsArg write and read the argument of an events notification.
func EventsArg(sessionID, jobID string) string { return strings.TrimSpace(sessionID + " " + jobID) }

// ParseEventsArg is EventsArg's inverse.
func ParseEventsArg(arg string) (sessionID, jobID string) {
	sessionID, jobID, _ = strings.Cut(arg, " ")
	return sessionID, jobID
}
