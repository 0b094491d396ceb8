package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/wire"
)

// The fleet's model is what its person sees of it: wire's shapes, built here.
type (
	Fleet     = wire.Fleet        // one person's agents, inbox and summary
	Unit      = wire.FleetUnit    // one agent: a session, or a job (whose session is not listed again)
	TurnRef   = wire.TurnRef      // a unit's current turn
	Activity  = wire.Activity     // what a unit did last
	InboxItem = wire.InboxItem    // something that needs the person
	Summary   = wire.FleetSummary // the units by state, and what they cost today (UTC)
)

// activityText bounds what a unit's last activity shows.
const activityText = 200

// cache is what was learnt from one person's sessions' events, so each poll reads only the
// new ones: per session, the seq read up to, each turn's cost and the last activity.
type cache struct {
	mu       sync.Mutex
	sessions map[string]*sessionCache
}

type sessionCache struct {
	seq   int64              // events read up to
	costs map[string]float64 // per turn: its latest cumulative cost
	last  *Activity
	// eventAt is when the newest event was recorded: any event, shown or not (a hook, an API
	// retry, a line that is not JSON), says the agent is doing something.
	eventAt time.Time
	turns   []store.Turn // as of turnsAt
	turnAt  int64        // the session's LastSeq when turns were read
}

func newCache() *cache { return &cache{sessions: map[string]*sessionCache{}} }

// build reads user's fleet from the store.
func (s *Service) build(ctx context.Context, user string) (Fleet, error) {
	st := s.cfg.Store
	sbs, err := st.ListSandboxes(ctx, user)
	if err != nil {
		return Fleet{}, fmt.Errorf("list sandboxes: %w", err)
	}
	sessions, err := st.ListSessions(ctx, user)
	if err != nil {
		return Fleet{}, fmt.Errorf("list sessions: %w", err)
	}
	jobs, err := st.ListJobs(ctx, "", user)
	if err != nil {
		return Fleet{}, fmt.Errorf("list jobs: %w", err)
	}
	now := s.cfg.Clock.Now()
	sandboxState := map[string]string{}
	for _, sb := range sbs {
		sandboxState[sb.Name] = sb.State
	}
	jobOf := map[string]store.Job{}
	for _, j := range jobs {
		jobOf[j.SessionID] = j
	}
	c := s.cacheOf(user)
	c.mu.Lock()
	defer c.mu.Unlock()
	f := Fleet{User: user, Agents: []Unit{}, Inbox: []InboxItem{}}
	var costToday float64
	seen := map[string]bool{}
	for _, se := range sessions {
		seen[se.ID] = true
		sc, err := s.learn(ctx, c, se)
		if err != nil {
			return Fleet{}, err
		}
		u := s.unit(se, sc, sandboxState, now)
		if j, ok := jobOf[se.ID]; ok {
			u.ID, u.Kind = j.ID, "job"
		}
		for _, t := range sc.turns {
			if sameDay(t.CreatedAt, now) {
				costToday += sc.costs[t.ID]
			}
		}
		f.Agents = append(f.Agents, u)
		f.Inbox = append(f.Inbox, s.unitInbox(u, sc, jobOf[se.ID], now)...)
	}
	for id := range c.sessions { // deleted sessions
		if !seen[id] {
			delete(c.sessions, id)
		}
	}
	f.Inbox = append(f.Inbox, s.sandboxInbox(sbs, now)...)
	f.Inbox = append(f.Inbox, s.processInbox(user, now)...)
	if f.Inbox, err = s.undismissed(ctx, user, f.Inbox, now); err != nil {
		return Fleet{}, err
	}
	sort.SliceStable(f.Agents, func(i, j int) bool {
		return time.Time(f.Agents[i].StartedAt).After(time.Time(f.Agents[j].StartedAt))
	})
	sort.SliceStable(f.Inbox, func(i, j int) bool { return time.Time(f.Inbox[i].At).After(time.Time(f.Inbox[j].At)) })
	f.Summary = summarize(f, costToday)
	return f, nil
}

// learn brings se's cache up to date: its turns when its events moved, and the new events.
func (s *Service) learn(ctx context.Context, c *cache, se store.Session) (*sessionCache, error) {
	sc, ok := c.sessions[se.ID]
	if !ok {
		sc = &sessionCache{costs: map[string]float64{}, turnAt: -1}
		c.sessions[se.ID] = sc
	}
	// A turn that has not ended may change state with no event of its own (queued to running,
	// a cancel): its session's turns are read again each time; an ended one's only when new
	// events say a turn began.
	active := len(sc.turns) > 0 && !store.TurnEnded(sc.turns[len(sc.turns)-1].State)
	if sc.turnAt != se.LastSeq || active {
		ts, err := s.cfg.Store.ListTurns(ctx, se.ID)
		if err != nil {
			return nil, fmt.Errorf("list turns of session %s: %w", se.ID, err)
		}
		sc.turns, sc.turnAt = ts, se.LastSeq
	}
	for sc.seq < se.LastSeq {
		evs, err := s.cfg.Store.ListEvents(ctx, se.ID, sc.seq, turns.MaxEventsPage)
		if err != nil {
			return nil, fmt.Errorf("list events of session %s: %w", se.ID, err)
		}
		if len(evs) == 0 {
			break // deleted by retention
		}
		for _, e := range evs {
			sc.take(e)
		}
	}
	return sc, nil
}

// take learns one event: its time, a turn's cost so far, and the last activity.
func (sc *sessionCache) take(e store.Event) {
	sc.seq = e.Seq
	if e.TS.After(sc.eventAt) {
		sc.eventAt = e.TS
	}
	if e.Invalid {
		return
	}
	if e.Type == turns.TypeTurnFinished {
		// Only what the activity needs: a row an older agent's log wrote as turn.finished, with
		// other fields of other types, still says why its turn failed.
		var f struct{ Status, Reason string }
		if json.Unmarshal(e.Data, &f) == nil && f.Status == store.TurnFailed && f.Reason != "" {
			sc.last = &Activity{Kind: "error", Text: clip(f.Reason), At: wire.Time(e.TS)}
		}
		return
	}
	for _, it := range turns.Classify(e.Data).Items {
		var a *Activity
		switch it.Kind {
		case turns.KindToolCall:
			text := it.Command
			if text == "" {
				text = it.Tool
			}
			a = &Activity{Kind: "tool_call", Text: text}
		case turns.KindText:
			a = &Activity{Kind: "message", Text: it.Text}
		case turns.KindResult:
			a = &Activity{Kind: "result", Text: it.Text}
		case turns.KindError:
			a = &Activity{Kind: "error", Text: it.Text}
		case turns.KindRetry:
			a = &Activity{Kind: "retry", Text: it.Text}
		case turns.KindStart:
			a = &Activity{Kind: "start", Text: it.Text}
		case turns.KindCost:
			if it.CostUSD != nil {
				sc.costs[e.TurnID] = *it.CostUSD
			}
		}
		if a != nil && a.Text != "" {
			a.Text, a.At = clip(a.Text), wire.Time(e.TS)
			sc.last = a
		}
	}
}

// unit makes se's unit from what its cache knows.
func (s *Service) unit(se store.Session, sc *sessionCache, sandboxState map[string]string, now time.Time) Unit {
	u := Unit{ID: se.ID, Name: se.Name, Kind: "session", Agent: se.Agent, Sandbox: se.Sandbox, State: "idle",
		StartedAt: wire.Time(se.CreatedAt), UpdatedAt: wire.Time(se.CreatedAt), Last: sc.last}
	if st, ok := sandboxState[se.Sandbox]; ok {
		u.SandboxState = st
	} else {
		u.SandboxState = "gone"
	}
	for _, c := range sc.costs {
		u.CostUSD += c
	}
	if n := len(sc.turns); n > 0 {
		t := sc.turns[n-1]
		u.Turn, u.State = &TurnRef{ID: t.ID, State: t.State}, t.State
		u.UpdatedAt = wire.Time(latest(t.CreatedAt, t.StartedAt, t.EndedAt))
	}
	if sc.eventAt.After(time.Time(u.UpdatedAt)) {
		u.UpdatedAt = wire.Time(sc.eventAt)
	}
	u.Stuck = u.State == store.TurnRunning && now.Sub(time.Time(u.UpdatedAt)) >= s.cfg.StuckAfter
	return u
}

// unitInbox is what of u needs the person: its current turn failed, or its job finished.
func (s *Service) unitInbox(u Unit, sc *sessionCache, j store.Job, now time.Time) []InboxItem {
	if u.Turn == nil || !store.TurnEnded(u.Turn.State) {
		return nil
	}
	t := sc.turns[len(sc.turns)-1]
	if now.Sub(t.EndedAt) > s.cfg.InboxWindow {
		return nil
	}
	switch {
	case u.Kind == "job":
		text := "Job " + u.Name + " finished: " + t.State
		if t.Reason != "" {
			text += " (" + t.Reason + ")"
		}
		return []InboxItem{{ID: "job_finished:" + j.ID, Kind: "job_finished", Agent: u.ID, Sandbox: u.Sandbox, Text: text, At: wire.Time(t.EndedAt)}}
	case t.State == store.TurnFailed:
		text := "A turn of " + u.Name + " failed"
		if t.Reason != "" {
			text += ": " + t.Reason
		}
		return []InboxItem{{ID: "turn_failed:" + t.ID, Kind: "turn_failed", Agent: u.ID, Sandbox: u.Sandbox, Text: text, At: wire.Time(t.EndedAt)}}
	}
	return nil
}

// sandboxInbox lists the sandboxes that failed within the window.
func (s *Service) sandboxInbox(sbs []store.Sandbox, now time.Time) []InboxItem {
	var out []InboxItem
	for _, sb := range sbs {
		if sb.State == "failed" && now.Sub(sb.UpdatedAt) <= s.cfg.InboxWindow {
			out = append(out, InboxItem{ID: "sandbox_failed:" + sb.Name + ":" + sb.CreatedAt.UTC().Format(time.RFC3339Nano),
				Kind: "sandbox_failed", Sandbox: sb.Name, Text: "Sandbox " + sb.Name + " failed: " + sb.Reason, At: wire.Time(sb.UpdatedAt)})
		}
	}
	return out
}

// processInbox lists user's processes that exited non-zero and are still listed.
func (s *Service) processInbox(user string, now time.Time) []InboxItem {
	if s.cfg.Processes == nil {
		return nil
	}
	var out []InboxItem
	for _, p := range s.cfg.Processes.OfUser(user) {
		if p.State != process.StateRunning && p.ExitCode != nil && *p.ExitCode != 0 && now.Sub(p.EndedAt) <= s.cfg.InboxWindow {
			out = append(out, InboxItem{ID: "process_failed:" + p.ID, Kind: "process_failed", Sandbox: p.Sandbox, Process: p.ID,
				Text: fmt.Sprintf("%s in %s ended: %s", clip(p.Command), p.Sandbox, p.Status), At: wire.Time(p.EndedAt)})
		}
	}
	return out
}

func summarize(f Fleet, costToday float64) Summary {
	sum := Summary{Agents: len(f.Agents), ByState: map[string]int{}, Inbox: len(f.Inbox), CostTodayUSD: costToday}
	for _, u := range f.Agents {
		sum.ByState[u.State]++
		if u.Stuck {
			sum.Stuck++
		}
	}
	return sum
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

func sameDay(a, b time.Time) bool {
	ay, am, ad := a.UTC().Date()
	by, bm, bd := b.UTC().Date()
	return ay == by && am == bm && ad == bd
}

// clip shortens text to activityText characters, on one line.
func clip(text string) string {
	r := []rune(text)
	for i, c := range r {
		if c == '\n' || c == '\r' {
			r[i] = ' '
		}
	}
	if len(r) > activityText {
		return string(r[:activityText]) + "…"
	}
	return string(r)
}

// jsonOf is v's JSON, for comparing what changed.
func jsonOf(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
