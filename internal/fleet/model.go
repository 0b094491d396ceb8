package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
	Tokens    = wire.Tokens       // the tokens a unit's turns used
	InboxItem = wire.InboxItem    // something that needs the person
	Summary   = wire.FleetSummary // the units by state, and what they cost today (UTC)
)

// activityText bounds what a unit's last activity shows; taskText its task.
const (
	activityText = 200
	taskText     = 100
)

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
	// tokens sums the token counts its events reported (Codex's), over every turn.
	tokens Tokens
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
			// A job is known by its id (the API's, jobs ls'), not its session's made-up name.
			u.ID, u.Kind, u.Name = j.ID, "job", j.ID
		}
		for _, t := range sc.turns {
			if sameDay(t.CreatedAt, now) {
				costToday += sc.costs[t.ID]
			}
		}
		f.Agents = append(f.Agents, u)
		f.Inbox = append(f.Inbox, s.unitInbox(u, sc, now)...)
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
			sc.tokens.Input += it.InputTokens
			sc.tokens.Output += it.OutputTokens
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
	if sc.tokens != (Tokens{}) {
		tk := sc.tokens
		u.Tokens = &tk
	}
	if n := len(sc.turns); n > 0 {
		t := sc.turns[n-1]
		u.Turn, u.State = &TurnRef{ID: t.ID, State: t.State, StartedAt: wire.Stamp(t.StartedAt)}, t.State
		u.Task = task(t.Prompt)
		if store.TurnEnded(t.State) {
			u.EndedAt = wire.Stamp(t.EndedAt)
		}
		u.UpdatedAt = wire.Time(latest(t.CreatedAt, t.StartedAt, t.EndedAt))
	}
	if !sc.eventAt.IsZero() {
		u.LastActivityAt = wire.Stamp(sc.eventAt)
	}
	if sc.eventAt.After(time.Time(u.UpdatedAt)) {
		u.UpdatedAt = wire.Time(sc.eventAt)
	}
	u.Stuck = u.State == store.TurnRunning && now.Sub(time.Time(u.UpdatedAt)) >= s.cfg.StuckAfter
	return u
}

// unitInbox is what of u needs the person: it looks stuck; its current turn failed, or is done
// and waits for the next prompt; its job ended. A turn cancelled is the person's own doing.
func (s *Service) unitInbox(u Unit, sc *sessionCache, now time.Time) []InboxItem {
	if u.Turn == nil {
		return nil
	}
	t := sc.turns[len(sc.turns)-1]
	it := InboxItem{State: t.State, Agent: u.ID, Sandbox: u.Sandbox, At: wire.Time(t.EndedAt)}
	switch {
	case u.Stuck:
		// One item for each time it falls silent: its id names when.
		quiet := time.Time(u.UpdatedAt)
		it.ID, it.Kind, it.At = "stuck:"+t.ID+":"+strconv.FormatInt(quiet.UnixMilli(), 10), "stuck", u.UpdatedAt
		it.Text = fmt.Sprintf("%s looks stuck: nothing from it for over %s", u.Name, spell(s.cfg.StuckAfter))
		return []InboxItem{it}
	case !store.TurnEnded(t.State) || now.Sub(t.EndedAt) > s.cfg.InboxWindow:
		return nil
	case u.Kind == "job":
		it.ID, it.Kind, it.Text = "job_finished:"+u.ID, "job_finished", jobText(u, t)
	case t.State == store.TurnFailed:
		it.ID, it.Kind, it.Text = "turn_failed:"+t.ID, "turn_failed", "A turn of "+u.Name+" failed"+colon(t.Reason)
	case t.State == store.TurnDone:
		it.ID, it.Kind, it.Text = "turn_done:"+t.ID, "turn_done", u.Name+" is done, waiting for you"+colon(u.Task)
	default:
		return nil
	}
	return []InboxItem{it}
}

// jobText says how job u's turn t ended, in a person's words.
func jobText(u Unit, t store.Turn) string {
	switch t.State {
	case store.TurnDone:
		return "Job " + u.ID + " is done" + colon(u.Task)
	case store.TurnFailed:
		return "Job " + u.ID + " failed" + colon(t.Reason)
	}
	return "Job " + u.ID + " was " + t.State + colon(t.Reason)
}

// colon is ": text", or "" for no text.
func colon(text string) string {
	if text == "" {
		return ""
	}
	return ": " + text
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
	return s.processItems(s.cfg.Processes.OfUser(user), now)
}

// processItems are the items of ps: those that exited non-zero within the window.
func (s *Service) processItems(ps []process.Info, now time.Time) []InboxItem {
	var out []InboxItem
	for _, p := range ps {
		// A process killed on purpose ends as the kill made it: that is no failure.
		if p.State != process.StateRunning && !p.Killed && p.ExitCode != nil && *p.ExitCode != 0 && now.Sub(p.EndedAt) <= s.cfg.InboxWindow {
			out = append(out, InboxItem{ID: "process_failed:" + p.ID, Kind: "process_failed", Sandbox: p.Sandbox, Process: p.ID,
				Text: processText(p), At: wire.Time(p.EndedAt)})
		}
	}
	return out
}

// processText says how p ended, naming it by the command its person gave.
func processText(p process.Info) string {
	what := clip(p.Command)
	if p.Command == wire.LoginShell {
		what = "A login shell"
	}
	what += " (" + p.ID + " in " + p.Sandbox + ")"
	if *p.ExitCode >= 0 {
		return fmt.Sprintf("%s exited with code %d", what, *p.ExitCode)
	}
	return what + " ended" + colon(p.Status)
}

// summarize counts f's units by state, a stuck one as stuck only, and its inbox.
func summarize(f Fleet, costToday float64) Summary {
	sum := Summary{Agents: len(f.Agents), ByState: map[string]int{}, Inbox: len(f.Inbox), CostTodayUSD: costToday}
	for _, u := range f.Agents {
		if u.Stuck {
			sum.ByState["stuck"]++
			sum.Stuck++
		} else {
			sum.ByState[u.State]++
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

// task is what prompt asks, for a row: its first line that is not blank, cut to taskText.
func task(prompt string) string {
	for line := range strings.Lines(prompt) {
		if line = strings.TrimSpace(line); line != "" {
			if r := []rune(line); len(r) > taskText {
				return string(r[:taskText]) + "…"
			}
			return line
		}
	}
	return ""
}

// jsonOf is v's JSON, for comparing what changed.
func jsonOf(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// spell is d as the inbox says it: "10 min", "2 h", "30 s" (cut to its largest unit).
func spell(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.Itoa(int(d.Hours())) + " h"
	case d >= time.Minute:
		return strconv.Itoa(int(d.Minutes())) + " min"
	}
	return strconv.Itoa(max(1, int(d.Seconds()))) + " s"
}
