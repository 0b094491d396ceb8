package watch

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/store"
)

// shared is one daemon watch and the events it has seen, held by every Watch of its key.
type shared struct {
	key    key
	keep   int
	ctx    context.Context // the daemon watch's; cancel ends it
	cancel context.CancelFunc
	refs   int // the Service's mu guards it

	// started is closed once the daemon's watch is in place or refused (startErr); written
	// before it is closed, read after.
	started  chan struct{}
	startErr error

	mu      sync.Mutex // guards the rest
	events  []Event    // the latest, at most keep, oldest first
	last    int64      // the seq of the latest event; the first is 1
	changed chan struct{}
	err     error // why the daemon's watch ended; nil while it runs
	ended   bool
}

func (s *Service) newShared(k key) *shared {
	ctx, cancel := context.WithCancel(s.ctx)
	return &shared{key: k, keep: s.cfg.Keep, ctx: ctx, cancel: cancel, started: make(chan struct{}), changed: make(chan struct{})}
}

// run watches through the daemon until the last hold goes or the watch breaks.
func (s *Service) run(sh *shared, sb store.Sandbox) {
	ctx := sh.ctx
	defer sh.cancel()
	ws, err := s.start(ctx, sb, sh.key)
	if err != nil {
		sh.startErr = err
		close(sh.started)
		sh.end(err)
		s.forget(sh)
		return
	}
	close(sh.started)
	defer ws.Close()
	for {
		ev, err := ws.Next()
		if err != nil {
			if ctx.Err() != nil {
				err = nil // the last hold left, or hangar is stopping
			} else if errors.Is(err, io.EOF) {
				err = errors.New("the daemon ended the watch")
			}
			sh.end(err)
			s.forget(sh)
			return
		}
		if ev.Op == envd.OpKeepalive {
			continue
		}
		sh.add(Event{TS: s.cfg.Clock.Now(), Name: ev.Name, Type: string(ev.Op)})
	}
}

// start asks sb's daemon to watch k's directory.
func (s *Service) start(ctx context.Context, sb store.Sandbox, k key) (*envd.WatchStream, error) {
	c, err := s.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return nil, err
	}
	ws, err := c.WatchDir(ctx, k.dir, k.recursive)
	if err != nil {
		return nil, startError(sb, k.dir, err)
	}
	return ws, nil
}

// forget drops a shared watch that ended by itself, so the next Open starts a new one.
func (s *Service) forget(sh *shared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared[sh.key] == sh {
		delete(s.shared, sh.key)
	}
}

// add keeps ev as the next event and wakes the readers.
func (sh *shared) add(ev Event) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.last++
	ev.Seq = sh.last
	if len(sh.events) == sh.keep {
		copy(sh.events, sh.events[1:])
		sh.events = sh.events[:sh.keep-1]
	}
	sh.events = append(sh.events, ev)
	close(sh.changed)
	sh.changed = make(chan struct{})
}

// end marks the watch ended with err (nil: stopped) and wakes the readers.
func (sh *shared) end(err error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.ended {
		return
	}
	sh.ended, sh.err = true, err
	close(sh.changed)
}

func (sh *shared) changedChan() <-chan struct{} {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.changed
}

func (sh *shared) endErr() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.ended {
		return nil
	}
	if sh.err == nil {
		return errors.New("the watch was stopped")
	}
	return sh.err
}

// read returns the kept events after since, next, and the gap before them when some are no
// longer kept. A since past the latest event is a position in an earlier watch of the same
// directory (numbering starts again at 1 when a watch starts anew after everyone left): it
// reads from the start, so nothing of this watch is missed.
func (sh *shared) read(since int64) ([]Event, int64, *Gap) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if since > sh.last {
		since = 0
	}
	if since == sh.last {
		return nil, since, nil
	}
	var gap *Gap
	first := sh.last - int64(len(sh.events)) + 1
	if since+1 < first {
		gap = &Gap{From: since + 1, To: first - 1}
		since = first - 1
	}
	out := make([]Event, sh.last-since)
	copy(out, sh.events[since-first+1:])
	return out, sh.last, gap
}
