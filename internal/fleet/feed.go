package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// The events of a fleet stream.
const (
	EventSnapshot = "snapshot" // Data: the Fleet, with "reset" when a resume position was too old
	EventAgent    = "agent"    // Data: a Unit that is new or changed
	EventGone     = "gone"     // Data: {"id": ...}: a unit that is no more
	EventInbox    = "inbox"    // Data: {"inbox": [...]}: the whole inbox, changed
	EventSummary  = "summary"  // Data: the Summary, changed
)

// feed is one person's fleet as followed: rebuilt every Poll while someone follows it (and for
// Retention after the last one left, so a reconnecting client resumes), what changed sent to
// every follower, and kept for Retention.
type feed struct {
	user  string
	ready chan struct{} // closed after the first build; err is then set
	err   error

	mu      sync.Mutex // guards the rest
	subs    map[*stream.Stream]struct{}
	left    time.Time // when the last follower left (or the feed began, before the first came)
	stopped bool
	cur     Fleet
	units   map[string][]byte    // unit id → its JSON as last built
	sentAt  map[string]time.Time // unit id → when its last agent event went out
	pending map[string]Unit      // changed units waiting for their Coalesce window
	inbox   []byte
	summary []byte
	seq     int64   // the id of the latest change sent
	log     []entry // the changes sent within Retention, oldest first
}

type entry struct {
	seq  int64
	at   time.Time
	item stream.Item
}

// maxLog bounds the changes kept for resuming, whatever their age: past it a reconnecting
// client gets a snapshot.
const maxLog = 2048

// Stream opens a live stream (kind fleet) of user's fleet ("" for p's own): a snapshot, then
// agent, gone, inbox and summary events as it changes, each with an id. With resume set, since
// is the id of the last event a client saw: it gets what came after it when that is still
// kept, else a fresh snapshot that says so. The caller renders the stream and must Close it.
func (s *Service) Stream(ctx context.Context, p auth.Principal, user string, since int64, resume bool) (*stream.Stream, error) {
	u, err := whose(p, user)
	if err != nil {
		return nil, err
	}
	if s.cfg.Streams == nil {
		return nil, stream.ErrShuttingDown
	}
	st, err := s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindFleet, Principal: p, Lifetime: true, Unpaced: true})
	if err != nil {
		return nil, err
	}
	for {
		f, err := s.feedOf(u)
		if err != nil {
			st.Close()
			return nil, err
		}
		select {
		case <-f.ready:
		case <-ctx.Done():
			st.Close()
			return nil, ctx.Err()
		}
		if f.err != nil {
			st.Close()
			return nil, f.err
		}
		if s.subscribe(f, st, since, resume) {
			return st, nil
		}
		// The feed stopped between our finding it and joining it: a new one starts.
	}
}

// feedOf returns user's feed, started on first use.
func (s *Service) feedOf(user string) (*feed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, stream.ErrShuttingDown
	}
	if f, ok := s.feeds[user]; ok {
		return f, nil
	}
	f := &feed{user: user, ready: make(chan struct{}), subs: map[*stream.Stream]struct{}{}, units: map[string][]byte{},
		sentAt: map[string]time.Time{}, pending: map[string]Unit{}, left: s.cfg.Clock.Now(),
		// Ids go on from the time the feed began, so an id from an earlier feed (before a
		// restart, or on another replica) is never taken for one of this feed's.
		seq: s.cfg.Clock.Now().UnixMicro()}
	s.feeds[user] = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runFeed(f)
	}()
	return f, nil
}

// runFeed rebuilds f every Poll until it has had no follower for Retention, or the Service
// closes.
func (s *Service) runFeed(f *feed) {
	first := true
	for {
		fl, err := s.build(s.ctx, f.user)
		switch {
		case first:
			first = false
			f.cur, f.err = fl, err
			f.remember(fl)
			close(f.ready)
			if err != nil {
				s.log.Error("read a fleet", "user", f.user, "err", err)
				s.stopFeed(f)
				return
			}
		case err != nil:
			if s.ctx.Err() == nil {
				s.log.Warn("read a fleet again", "user", f.user, "err", err)
			}
		default:
			s.update(f, fl)
		}
		if s.idle(f) {
			return
		}
		t := s.cfg.Clock.NewTimer(s.cfg.Poll, "fleet", "poll")
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			s.stopFeed(f)
			return
		}
	}
}

// remember takes fl as what the followers know, sending nothing (the first build).
func (f *feed) remember(fl Fleet) {
	for _, u := range fl.Agents {
		f.units[u.ID] = jsonOf(u)
	}
	f.inbox, f.summary = jsonOf(fl.Inbox), jsonOf(fl.Summary)
}

// update sends what changed between the last build and fl: gone units at once, changed ones
// at most once per Coalesce each (the latest state wins), and the inbox and summary when
// they changed.
func (s *Service) update(f *feed, fl Fleet) {
	now := s.cfg.Clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = fl
	ids := map[string]bool{}
	for _, u := range fl.Agents {
		ids[u.ID] = true
		if j := jsonOf(u); !bytes.Equal(f.units[u.ID], j) {
			f.units[u.ID] = j
			f.pending[u.ID] = u
		}
	}
	var gone []string
	for id := range f.units {
		if !ids[id] {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		delete(f.units, id)
		delete(f.pending, id)
		delete(f.sentAt, id)
		f.send(now, EventGone, jsonOf(wire.FleetGone{ID: id}))
	}
	var due []string
	for id := range f.pending {
		if now.Sub(f.sentAt[id]) >= s.cfg.Coalesce {
			due = append(due, id)
		}
	}
	sort.Strings(due)
	for _, id := range due {
		f.send(now, EventAgent, jsonOf(f.pending[id]))
		f.sentAt[id] = now
		delete(f.pending, id)
	}
	if j := jsonOf(fl.Inbox); !bytes.Equal(f.inbox, j) {
		f.inbox = j
		f.send(now, EventInbox, jsonOf(wire.FleetInbox{Inbox: fl.Inbox}))
	}
	if j := jsonOf(fl.Summary); !bytes.Equal(f.summary, j) {
		f.summary = j
		f.send(now, EventSummary, j)
	}
	for len(f.log) > 0 && now.Sub(f.log[0].at) > s.cfg.Retention {
		f.log = f.log[1:]
	}
}

// send numbers one change, keeps it, and gives it to every follower; a follower whose stream
// takes no more is dropped (its stream says why it ended). f.mu is held.
func (f *feed) send(now time.Time, event string, data []byte) {
	f.seq++
	it := stream.Item{Event: event, ID: strconv.FormatInt(f.seq, 10), Data: data, JSON: true}
	f.log = append(f.log, entry{seq: f.seq, at: now, item: it})
	if len(f.log) > maxLog {
		f.log = f.log[len(f.log)-maxLog:]
	}
	for st := range f.subs {
		if !st.Send(it) {
			delete(f.subs, st)
		}
	}
}

// subscribe adds st as a follower of f, first sending it what it missed after since (resume)
// or a snapshot. It reports false when f has stopped.
func (s *Service) subscribe(f *feed, st *stream.Stream, since int64, resume bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	if resume && f.kept(since) {
		from := sort.Search(len(f.log), func(i int) bool { return f.log[i].seq > since })
		for _, e := range f.log[from:] {
			st.Send(e.item)
		}
	} else {
		snap := wire.FleetSnapshot{Fleet: f.cur}
		if resume {
			snap.Reset = "Last-Event-ID " + strconv.FormatInt(since, 10) + " is not among the changes kept (the last " +
				s.cfg.Retention.String() + " of this server's): this snapshot replaces what you had"
		}
		data, _ := json.Marshal(snap)
		st.Send(stream.Item{Event: EventSnapshot, ID: strconv.FormatInt(f.seq, 10), Data: data, JSON: true})
	}
	f.subs[st] = struct{}{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-st.Done():
		case <-s.ctx.Done():
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, st)
		if len(f.subs) == 0 {
			f.left = s.cfg.Clock.Now()
		}
	}()
	return true
}

// kept reports whether every change after since is still kept. f.mu is held.
func (f *feed) kept(since int64) bool {
	if since > f.seq {
		return false
	}
	if since == f.seq {
		return true
	}
	if len(f.log) == 0 {
		return false
	}
	return since >= f.log[0].seq-1
}

// idle stops f when it has had no follower for Retention, and reports whether it did.
func (s *Service) idle(f *feed) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) > 0 || s.cfg.Clock.Since(f.left) < s.cfg.Retention {
		return false
	}
	f.stopped = true
	if s.feeds[f.user] == f {
		delete(s.feeds, f.user)
	}
	return true
}

// stopFeed stops f for good (a failed first read, or the Service closing): its followers'
// streams end.
func (s *Service) stopFeed(f *feed) {
	s.mu.Lock()
	if s.feeds[f.user] == f {
		delete(s.feeds, f.user)
	}
	s.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for st := range f.subs {
		st.End(stream.ReasonShutdown)
	}
}
