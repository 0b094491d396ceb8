package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/eventtext"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// notifier wakes the followers of a session or a job after events were appended to it. A
// follower takes the key's channel before it reads the store, and reads again once that
// channel is closed: an append between its read and its wait still wakes it, so nothing is
// missed; what it reads is what the store says, so nothing is sent twice. Waking never blocks.
type notifier struct {
	mu    sync.Mutex
	chans map[string]*waiters // a key is here only while someone waits on it
}

type waiters struct {
	ch chan struct{}
	n  int // followers waiting on ch
}

// wait returns a channel closed at the key's next wake, and release, to call when no longer
// waiting on it (leaving before the wake), so a key nobody waits on is forgotten.
func (n *notifier) wait(key string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.chans[key]
	if !ok {
		w = &waiters{ch: make(chan struct{})}
		n.chans[key] = w
	}
	w.n++
	return w.ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if w.n--; w.n == 0 && n.chans[key] == w {
			delete(n.chans, key)
		}
	}
}

// wake wakes the keys' waiters.
func (n *notifier) wake(keys ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		if w, ok := n.chans[k]; ok {
			close(w.ch)
			delete(n.chans, k)
		}
	}
}

// wakeAll wakes every waiter.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, w := range n.chans {
		close(w.ch)
		delete(n.chans, k)
	}
}

// waiting is how many keys have followers waiting (for tests).
func (n *notifier) waiting() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chans)
}

func sessionKey(id string) string { return "session " + id }
func jobKey(id string) string     { return "job " + id }

// appendEvents records events (store.AppendEvents) and wakes the session's and job's
// followers, whatever the outcome: on a conflict another watcher recorded them.
func (s *Service) appendEvents(ctx context.Context, a store.EventAppend) ([]store.Event, error) {
	evs, err := s.cfg.Store.AppendEvents(ctx, a)
	if err == nil {
		s.announce(ctx, a)
	}
	keys := []string{sessionKey(a.SessionID)}
	if a.JobID != "" {
		keys = append(keys, jobKey(a.JobID))
	}
	s.woken.wake(keys...)
	return evs, err
}

// Follow opens a live stream (kind events) of the session ref's events with seq > since:
// those stored first, then each as it is recorded, every one an item whose ID is its seq and
// whose Data is the event's JSON. The stream stays open (until its lifetime, its token's
// revocation, shutdown, the sandbox's end, or the caller closing it); the caller renders it
// and must Close it.
func (s *Service) Follow(ctx context.Context, p auth.Principal, ref string, since int64) (*stream.Stream, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	list := func(ctx context.Context, after int64) ([]store.Event, error) {
		return s.cfg.Store.ListEvents(ctx, se.ID, after, MaxEventsPage)
	}
	over := func(ctx context.Context) stream.Reason { return s.sessionOver(ctx, se) }
	return s.follow(ctx, p, se.Sandbox, sessionKey(se.ID), since, list, func(e store.Event) int64 { return e.Seq }, over)
}

// FollowJob is Follow for a job p may see: the IDs are job seqs.
func (s *Service) FollowJob(ctx context.Context, p auth.Principal, id string, since int64) (*stream.Stream, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return nil, err
	}
	list := func(ctx context.Context, after int64) ([]store.Event, error) {
		return s.cfg.Store.ListJobEvents(ctx, j.ID, after, MaxEventsPage)
	}
	over := func(ctx context.Context) stream.Reason {
		se, err := s.cfg.Store.GetSession(ctx, "", j.SessionID)
		if err != nil {
			return ""
		}
		return s.sessionOver(ctx, se)
	}
	return s.follow(ctx, p, j.Sandbox, jobKey(j.ID), since, list, func(e store.Event) int64 { return e.JobSeq }, over)
}

// follow opens the stream and starts its feeder. Event streams are unpaced: what they carry
// is read from the store at the reader's pace (the feeder waits for the reader), and an
// event, up to a run-log line's 1 MiB, is one message. over says why no event can come any
// more ("" while one can): the feeder asks it when the stream is opened and after each
// turn.finished it sends, and ends the stream with that reason once all is sent.
func (s *Service) follow(ctx context.Context, p auth.Principal, sandbox, key string, since int64,
	list func(context.Context, int64) ([]store.Event, error), seqOf func(store.Event) int64,
	over func(context.Context) stream.Reason) (*stream.Stream, error) {
	if since < 0 {
		return nil, fmt.Errorf("%w: since must be 0 or more", ErrInvalid)
	}
	if s.cfg.Streams == nil {
		return nil, fmt.Errorf("follow events: no stream registry configured")
	}
	// A failed sandbox's session may still get the end of a turn read on without the
	// daemon: its feeder is woken to ask over again rather than ended.
	failed := new(atomic.Bool)
	st, err := s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindEvents, Principal: p, Sandbox: sandbox, Lifetime: true, Unpaced: true,
		SandboxFailed: func() { failed.Store(true); s.woken.wake(key) }})
	if err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.feed(st, key, since, list, seqOf, over, failed)
	}()
	return st, nil
}

// feed sends the events after last, page by page, then waits to be woken and sends the new
// ones, until the stream ends or the Service closes. It never holds up the watcher: it reads
// the store, and waits only for its own reader.
func (s *Service) feed(st *stream.Stream, key string, last int64,
	list func(context.Context, int64) ([]store.Event, error), seqOf func(store.Event) int64,
	over func(context.Context) stream.Reason, failed *atomic.Bool) {
	check := true // at the start: a stream opened on a session that is over ends once caught up
	for {
		woken, release := s.woken.wait(key)
		ok, finished := s.sendAfter(st, key, &last, list, seqOf)
		if !ok {
			release()
			return
		}
		if check || finished || failed.Swap(false) {
			check = false
			if why := over(s.ctx); why != "" {
				// A turn may have ended between the read above and this: its last events
				// were recorded with its end, so one more read sends them.
				ok, _ := s.sendAfter(st, key, &last, list, seqOf)
				release()
				if ok {
					st.FinishWith(why) // what was sent still reaches the reader first
				}
				return
			}
		}
		select {
		case <-woken:
			release()
		case <-st.Done():
			release()
			return
		case <-s.ctx.Done():
			release()
			st.End(stream.ReasonShutdown)
			return
		}
	}
}

// sendAfter sends the stored events after *last, page by page, moving *last on. It reports
// false when the stream takes no more (ended, or the store failed: then it ends it), and
// whether it sent a turn.finished.
func (s *Service) sendAfter(st *stream.Stream, key string, last *int64,
	list func(context.Context, int64) ([]store.Event, error), seqOf func(store.Event) int64) (ok, finished bool) {
	for {
		evs, err := list(s.ctx, *last)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("follow events", "key", key, "err", err)
			}
			st.End(stream.ReasonError)
			return false, finished
		}
		for _, e := range evs {
			// MarshalJSON itself, not json.Marshal: that would check and compact its output
			// (up to a 1 MiB line) a second time.
			data, _ := fromStoreEvent(e).MarshalJSON()
			seq := seqOf(e)
			if !st.SendWait(s.ctx, stream.Item{ID: strconv.FormatInt(seq, 10), Data: data, JSON: true}) {
				return false, finished
			}
			*last = seq
			finished = finished || e.Type == TypeTurnFinished
		}
		if len(evs) < MaxEventsPage {
			return true, finished
		}
	}
}

// Wire is the event as a client sees it, in a page and on a live stream alike, with what it
// says to a person (eventtext's lines).
func (e Event) Wire() wire.Event {
	w := wire.Event{Seq: e.Seq, JobSeq: e.JobSeq, Turn: e.TurnID, TS: wire.Time(e.TS), Type: e.Type,
		Data: json.RawMessage(e.Data), Invalid: e.Invalid, Truncated: e.Truncated}
	w.Lines = eventtext.Lines(w)
	return w
}

// MarshalJSON writes the event as its wire.Event: what a live stream sends.
func (e Event) MarshalJSON() ([]byte, error) { return json.Marshal(e.Wire()) }

// sessionOver says why a session can get no more events ("" while it can): its sandbox was
// destroyed (or its name taken again) or has failed, and none of its turns runs or waits.
// A turn still running in a failed sandbox is still being read (through the provider, without
// the daemon) and ends within its bound, so its session is over only after it.
func (s *Service) sessionOver(ctx context.Context, se store.Session) stream.Reason {
	why := stream.ReasonFailed
	sb, err := s.sandboxFor(ctx, se)
	switch {
	case errors.Is(err, errSandboxGone):
		why = stream.ReasonDestroyed
	case err != nil || sb.State != string(provider.StateFailed):
		return ""
	}
	ts, err := s.cfg.Store.ListTurns(ctx, se.ID)
	if err != nil {
		return ""
	}
	for _, t := range ts {
		if !store.TurnEnded(t.State) {
			return ""
		}
	}
	return why
}
