package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 20 * time.Second

var (
	ada    = auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	bob    = auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
	admin  = auth.Principal{TokenID: "tok_root", User: "root", Scopes: []auth.Scope{auth.ScopeAdmin}}
	jobs   = auth.Principal{TokenID: "tok_jobs", User: "ada", Scopes: []auth.Scope{auth.ScopeJobs}}
	bound  = auth.Principal{TokenID: "tok_bound", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}, Sandbox: "box"}
	mcpTok = auth.Principal{TokenID: "tok_mcp", User: "ada", Scopes: []auth.Scope{auth.ScopeMCP}}
)

// Two real run-log lines: a Claude Code tool call, and its result with the run's cost.
const (
	toolCall = `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./..."}}]}}`
	result   = `{"type":"result","subtype":"success","is_error":false,"result":"All green.","total_cost_usd":0.25}`
)

type env struct {
	s     *Service
	st    store.Store
	clock *quartz.Mock
	now   time.Time
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := quartz.NewMock(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock.Set(now)
	streams := stream.New(stream.Config{Clock: clock})
	cfg.Store, cfg.Streams, cfg.Clock = st, streams, clock
	s := New(cfg)
	t.Cleanup(func() { streams.Shutdown(); s.Close() })
	e := &env{s: s, st: st, clock: clock, now: now}
	for _, sb := range []store.Sandbox{
		{Name: "box", Owner: "ada", Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now},
		{Name: "broke", Owner: "ada", Provider: "local", State: "failed", Reason: "its daemon died", CreatedAt: now, UpdatedAt: now},
		{Name: "bobs", Owner: "bob", Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now},
	} {
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// session makes a session of owner in sandbox with one turn in state, and appends lines.
func (e *env) session(t *testing.T, id, owner, sandbox, state string, lines ...string) store.Turn {
	t.Helper()
	ctx := context.Background()
	if err := e.st.CreateSession(ctx, store.Session{ID: id, Name: "n-" + id, Owner: owner, TokenID: "tok_" + owner, Sandbox: sandbox,
		Agent: "claude-code", CreatedAt: e.now}); err != nil {
		t.Fatal(err)
	}
	tu := store.Turn{ID: "turn_" + id, SessionID: id, Prompt: "p", State: store.TurnRunning, CreatedAt: e.now, StartedAt: e.now}
	if err := e.st.CreateTurn(ctx, tu); err != nil {
		t.Fatal(err)
	}
	e.appendLines(t, id, tu.ID, lines...)
	if state != store.TurnRunning {
		e.endTurn(t, tu.ID, state)
	}
	return tu
}

func (e *env) appendLines(t *testing.T, session, turn string, lines ...string) {
	t.Helper()
	if len(lines) == 0 {
		return
	}
	var evs []store.Event
	for _, l := range lines {
		evs = append(evs, store.Event{TurnID: turn, TS: e.clock.Now(), Type: "line", Data: []byte(l)})
	}
	if _, err := e.st.AppendEvents(context.Background(), store.EventAppend{SessionID: session, TurnID: turn, ReadPos: -1, Events: evs}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) endTurn(t *testing.T, turn, state string) {
	t.Helper()
	if err := e.st.UpdateTurn(context.Background(), store.TurnUpdate{ID: turn, State: state, Reason: "exit status 1", EndedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestRead: a person's fleet has their sessions and jobs as units, what each did last and
// cost, the inbox and the summary; nobody else's.
func TestRead(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.session(t, "s1", "ada", "box", store.TurnRunning, toolCall)
	e.session(t, "s2", "ada", "box", store.TurnDone, toolCall, result)
	failed := e.session(t, "s3", "ada", "box", store.TurnFailed)
	jt := e.session(t, "s4", "ada", "box", store.TurnDone, result)
	if err := e.st.CreateJob(ctx, store.Job{ID: "job_1", TokenID: "tok_jobs", Owner: "ada", Sandbox: "box", SessionID: "s4", TurnID: jt.ID, CreatedAt: e.now}); err != nil {
		t.Fatal(err)
	}
	e.session(t, "b1", "bob", "bobs", store.TurnRunning)
	f, err := e.s.Read(ctx, ada, "")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Unit{}
	for _, u := range f.Agents {
		byID[u.ID] = u
	}
	if len(f.Agents) != 4 || byID["b1"].ID != "" || byID["s4"].ID != "" {
		t.Fatalf("units %+v; want s1, s2, s3 and job_1 (not s4 again), none of bob's", f.Agents)
	}
	if u := byID["s1"]; u.State != "running" || u.Last == nil || u.Last.Kind != "tool_call" || u.Last.Text != "go test ./..." ||
		u.SandboxState != "running" || u.Turn == nil || u.Turn.ID != "turn_s1" {
		t.Errorf("s1 = %+v (last %+v)", u, u.Last)
	}
	if u := byID["s2"]; u.State != "done" || u.CostUSD != 0.25 || u.Last.Kind != "result" || u.Last.Text != "All green." {
		t.Errorf("s2 = %+v (last %+v)", u, u.Last)
	}
	if u := byID["job_1"]; u.Kind != "job" || u.State != "done" || u.Name != "job_1" {
		t.Errorf("job_1 = %+v", u)
	}
	kinds := map[string]string{}
	for _, it := range f.Inbox {
		kinds[it.ID] = it.Kind
	}
	if kinds["turn_failed:"+failed.ID] != "turn_failed" || kinds["job_finished:job_1"] != "job_finished" || kinds["turn_done:turn_s2"] != "turn_done" ||
		len(f.Inbox) != 4 {
		t.Errorf("inbox %+v; want s3's failed turn, job_1 finished, s2 waiting and the failed sandbox", f.Inbox)
	}
	if f.Summary.Agents != 4 || f.Summary.ByState["done"] != 2 || f.Summary.ByState["running"] != 1 || f.Summary.ByState["failed"] != 1 ||
		f.Summary.CostTodayUSD != 0.5 || f.Summary.Inbox != 4 {
		t.Errorf("summary %+v", f.Summary)
	}
	if b, _ := json.Marshal(f); !strings.Contains(string(b), `"started_at":"2026-11-30T12:00:00.000Z"`) {
		t.Errorf("times are not hangar's: %s", b)
	}
	// Stuck: running with nothing recorded for StuckAfter.
	e.clock.Advance(10 * time.Minute).MustWait(ctx)
	f, _ = e.s.Read(ctx, ada, "")
	if f.Summary.Stuck != 1 || f.Summary.ByState["stuck"] != 1 || f.Summary.ByState["running"] != 0 {
		t.Errorf("after 10 quiet minutes: %+v, want s1 stuck, counted once (not running as well)", f.Summary)
	}
}

// TestStuckAfterIsASetting: a running agent is stuck once silent for the configured time, not
// before, and its inbox item says that time.
func TestStuckAfterIsASetting(t *testing.T) {
	e := newEnv(t, Config{StuckAfter: 30 * time.Second})
	ctx := context.Background()
	e.session(t, "s1", "ada", "box", store.TurnRunning)
	e.clock.Advance(29 * time.Second).MustWait(ctx)
	if f, _ := e.s.Read(ctx, ada, ""); f.Summary.Stuck != 0 {
		t.Errorf("29 s silent with StuckAfter 30 s: %+v, want none stuck", f.Summary)
	}
	e.clock.Advance(time.Second).MustWait(ctx)
	f, _ := e.s.Read(ctx, ada, "")
	said := ""
	for _, it := range f.Inbox {
		if it.Kind == "stuck" {
			said = it.Text
		}
	}
	if f.Summary.Stuck != 1 || !strings.HasSuffix(said, "looks stuck: nothing from it for over 30 s") {
		t.Errorf("30 s silent: summary %+v, inbox %+v; want s1 stuck, saying 30 s", f.Summary, f.Inbox)
	}
}

// TestWhoMaySee: only a person's own token, or an admin, sees a fleet.
func TestWhoMaySee(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.session(t, "s1", "ada", "box", store.TurnRunning)
	if f, err := e.s.Read(ctx, admin, "ada"); err != nil || len(f.Agents) != 1 || f.User != "ada" {
		t.Errorf("an admin asking for ada's: %+v, %v", f, err)
	}
	for name, c := range map[string]struct {
		p    auth.Principal
		user string
	}{"bob asking for ada's": {bob, "ada"}, "a jobs token": {jobs, ""}, "a bound token": {bound, ""}, "an mcp token": {mcpTok, ""}} {
		if _, err := e.s.Read(ctx, c.p, c.user); !errors.Is(err, ErrForbidden) {
			t.Errorf("%s: %v, want ErrForbidden", name, err)
		}
		if _, err := e.s.IssueTicket(ctx, c.p); c.user == "" && !errors.Is(err, ErrForbidden) {
			t.Errorf("%s asking for a ticket: %v, want ErrForbidden", name, err)
		}
	}
}

// TestTickets: a ticket is used once, within its TTL, and carries only its person.
func TestTickets(t *testing.T) {
	e := newEnv(t, Config{TicketTTL: time.Minute})
	ctx := context.Background()
	tk, err := e.s.IssueTicket(ctx, admin)
	if err != nil || !strings.HasPrefix(tk.Ticket, "hft_") {
		t.Fatalf("ticket %+v, %v", tk, err)
	}
	p, err := e.s.RedeemTicket(ctx, tk.Ticket)
	if err != nil || p.TokenID != admin.TokenID || p.User != "root" || p.IsAdmin() {
		t.Errorf("redeemed %+v, %v; want root's token, without admin", p, err)
	}
	if _, err := e.s.RedeemTicket(ctx, tk.Ticket); !errors.Is(err, ErrTicket) {
		t.Errorf("a second use: %v, want ErrTicket", err)
	}
	if _, err := e.s.RedeemTicket(ctx, "hft_forged"); !errors.Is(err, ErrTicket) {
		t.Errorf("a forged ticket: %v, want ErrTicket", err)
	}
	late, _ := e.s.IssueTicket(ctx, ada)
	e.clock.Advance(time.Minute).MustWait(ctx)
	if _, err := e.s.RedeemTicket(ctx, late.Ticket); !errors.Is(err, ErrTicket) {
		t.Errorf("a ticket a minute old: %v, want ErrTicket", err)
	}
}

// TestSignInTickets: a sign-in ticket is used once, within its TTL, names its token, and is
// never taken for a stream ticket nor a stream ticket for it.
func TestSignInTickets(t *testing.T) {
	e := newEnv(t, Config{TicketTTL: time.Minute})
	ctx := context.Background()
	if _, err := e.s.IssueSignIn(ctx, auth.Principal{TokenID: "tok_jobs", User: "ada", Scopes: []auth.Scope{auth.ScopeJobs}}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a jobs token's sign-in ticket: %v, want ErrForbidden", err)
	}
	tk, err := e.s.IssueSignIn(ctx, ada)
	if err != nil || !strings.HasPrefix(tk.Ticket, "hfs_") {
		t.Fatalf("sign-in ticket %+v, %v", tk, err)
	}
	if _, err := e.s.RedeemTicket(ctx, tk.Ticket); !errors.Is(err, ErrTicket) {
		t.Errorf("a sign-in ticket opening a stream: %v, want ErrTicket", err)
	}
	stream, _ := e.s.IssueTicket(ctx, ada)
	if _, err := e.s.RedeemSignIn(ctx, stream.Ticket); !errors.Is(err, ErrSignIn) {
		t.Errorf("a stream ticket signing in: %v, want ErrSignIn", err)
	}
	if id, err := e.s.RedeemSignIn(ctx, tk.Ticket); err != nil || id != ada.TokenID {
		t.Errorf("signing in = %q, %v; want %s", id, err, ada.TokenID)
	}
	if _, err := e.s.RedeemSignIn(ctx, tk.Ticket); !errors.Is(err, ErrSignIn) {
		t.Errorf("a second use: %v, want ErrSignIn", err)
	}
	late, _ := e.s.IssueSignIn(ctx, ada)
	e.clock.Advance(time.Minute).MustWait(ctx)
	if _, err := e.s.RedeemSignIn(ctx, late.Ticket); !errors.Is(err, ErrSignIn) {
		t.Errorf("a sign-in ticket a minute old: %v, want ErrSignIn", err)
	}
	// Links never opened do not stay: a ticket's life on, the next ask sweeps the expired.
	for range 3 {
		if _, err := e.s.IssueSignIn(ctx, ada); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute).MustWait(ctx)
	if _, err := e.s.IssueSignIn(ctx, ada); err != nil {
		t.Fatal(err)
	}
	if n, err := e.st.DeleteExpiredTickets(ctx, e.clock.Now()); err != nil || n != 0 {
		t.Errorf("%d expired tickets were left, %v; want them swept by the ask", n, err)
	}
	// Whatever is not of the shape hangar makes is refused before the store.
	for _, bad := range []string{"", "hfs_", "hfs_" + strings.Repeat("a", 42), "hfs_" + strings.Repeat("a", 42) + "!", "hft_" + strings.Repeat("a", 43)} {
		if _, err := e.s.RedeemSignIn(ctx, bad); !errors.Is(err, ErrSignIn) {
			t.Errorf("RedeemSignIn(%q) = %v, want ErrSignIn", bad, err)
		}
	}
}

// next returns what st holds now, without waiting.
func next(t *testing.T, st *stream.Stream) []stream.Item {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	items, err := st.Next(done, 0)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return items
}

// poll lets the feed read the fleet once more: the clock moves to its next poll, and the
// feed has sent what changed once it waits for the one after.
func (e *env) poll(ctx context.Context, t *testing.T, polls *quartz.Trap) {
	t.Helper()
	e.clock.Advance(time.Second).MustWait(ctx)
	polls.MustWait(ctx).MustRelease(ctx)
}

// TestStream: a snapshot first; then a unit's change at once, a second within Coalesce only
// when its window has passed (the latest state); a deleted session's gone; the inbox and
// summary when they change.
func TestStream(t *testing.T) {
	e := newEnv(t, Config{Poll: time.Second, Coalesce: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	polls := e.clock.Trap().NewTimer("fleet", "poll")
	defer polls.Close()
	tu := e.session(t, "s1", "ada", "box", store.TurnRunning)
	e.session(t, "s2", "ada", "box", store.TurnRunning)
	st, err := e.s.Stream(ctx, ada, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	polls.MustWait(ctx).MustRelease(ctx)
	items := next(t, st)
	if len(items) != 1 || items[0].Event != EventSnapshot || !strings.Contains(string(items[0].Data), `"id":"s1"`) {
		t.Fatalf("first %+v, want one snapshot with s1", items)
	}
	e.appendLines(t, "s1", tu.ID, toolCall)
	e.poll(ctx, t, polls)
	items = next(t, st)
	if len(items) != 1 || items[0].Event != EventAgent || !strings.Contains(string(items[0].Data), `"text":"go test ./..."`) {
		t.Fatalf("after a tool call: %+v, want one agent event with it", items)
	}
	e.appendLines(t, "s1", tu.ID, result)
	e.poll(ctx, t, polls) // 1 s after the last agent event: the unit is held back, not the summary
	if items := next(t, st); len(items) != 1 || items[0].Event != EventSummary || !strings.Contains(string(items[0].Data), `"cost_today_usd":0.25`) {
		t.Fatalf("a second change within 2 s: %+v, want only the summary (its cost) yet", items)
	}
	e.endTurn(t, tu.ID, store.TurnFailed)
	e.poll(ctx, t, polls) // 2 s: the latest state goes out, with the inbox and summary it changed
	items = next(t, st)
	var events []string
	for _, it := range items {
		events = append(events, it.Event)
	}
	if strings.Join(events, ",") != "agent,inbox,summary" || !strings.Contains(string(items[0].Data), `"state":"failed"`) {
		t.Fatalf("after the window: %v %s, want agent (failed), inbox, summary", events, items[0].Data)
	}
	if err := e.st.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	e.poll(ctx, t, polls)
	items = next(t, st)
	if len(items) < 1 || items[0].Event != EventGone || string(items[0].Data) != `{"id":"s2"}` {
		t.Fatalf("after a delete: %+v, want gone s2 first", items)
	}
}

// TestResume: a client that reconnects with the id of the last event it saw gets exactly what
// came after; one whose id is no longer kept, or not this server's, gets a snapshot that says so.
func TestResume(t *testing.T) {
	e := newEnv(t, Config{Poll: time.Second, Coalesce: time.Second, Retention: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	polls := e.clock.Trap().NewTimer("fleet", "poll")
	defer polls.Close()
	tu := e.session(t, "s1", "ada", "box", store.TurnRunning)
	first, err := e.s.Stream(ctx, ada, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	polls.MustWait(ctx).MustRelease(ctx)
	snap := next(t, first)[0]
	e.appendLines(t, "s1", tu.ID, toolCall)
	e.poll(ctx, t, polls)
	seen := next(t, first)[0]
	e.appendLines(t, "s1", tu.ID, result)
	e.poll(ctx, t, polls)
	missed := next(t, first) // the unit and the summary (its cost)
	if len(missed) != 2 {
		t.Fatalf("after a result: %+v, want the unit and the summary", missed)
	}

	open := func(since string) []stream.Item {
		t.Helper()
		n, _ := json.Number(since).Int64()
		st, err := e.s.Stream(ctx, ada, "", n, true)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return next(t, st)
	}
	if got := open(seen.ID); len(got) != 2 || got[0].ID != missed[0].ID || got[1].ID != missed[1].ID {
		t.Errorf("resumed after %s: %+v, want %s and %s", seen.ID, got, missed[0].ID, missed[1].ID)
	}
	if got := open(snap.ID); len(got) != 3 || got[0].ID != seen.ID {
		t.Errorf("resumed after the snapshot: %d items, want the 3 changes since", len(got))
	}
	if got := open("12"); len(got) != 1 || got[0].Event != EventSnapshot || !strings.Contains(string(got[0].Data), `"reset":"Last-Event-ID 12 is not among`) {
		t.Errorf("an id not this server's: %+v, want a snapshot saying so", got)
	}
	for range 6 { // past Retention: the changes are no longer kept
		e.poll(ctx, t, polls)
	}
	next(t, first)
	if got := open(seen.ID); len(got) != 1 || got[0].Event != EventSnapshot || !strings.Contains(string(got[0].Data), `"reset"`) {
		t.Errorf("an id older than what is kept: %+v, want a snapshot saying so", got)
	}
}

// TestTicketsPerToken: a token holds at most a few unused tickets; using one, or their expiry,
// makes room again.
func TestTicketsPerToken(t *testing.T) {
	e := newEnv(t, Config{TicketTTL: time.Minute})
	ctx := context.Background()
	var first Ticket
	for i := range maxTicketsPerToken {
		tk, err := e.s.IssueTicket(ctx, ada)
		if err != nil {
			t.Fatalf("ticket %d: %v", i+1, err)
		}
		if i == 0 {
			first = tk
		}
	}
	if _, err := e.s.IssueTicket(ctx, ada); !errors.Is(err, ErrTooManyTickets) {
		t.Fatalf("one ticket more: %v, want ErrTooManyTickets", err)
	}
	if _, err := e.s.IssueTicket(ctx, bob); err != nil {
		t.Errorf("another token's ticket: %v", err)
	}
	if _, err := e.s.RedeemTicket(ctx, first.Ticket); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.IssueTicket(ctx, ada); err != nil {
		t.Errorf("after using one: %v", err)
	}
	e.clock.Advance(time.Minute).MustWait(ctx)
	for i := range maxTicketsPerToken {
		if _, err := e.s.IssueTicket(ctx, ada); err != nil {
			t.Fatalf("after they expired, ticket %d: %v", i+1, err)
		}
	}
}

// replica is a second Service on e's store, as another `hangar serve` on one database is.
func (e *env) replica(t *testing.T) *Service {
	streams := stream.New(stream.Config{Clock: e.clock})
	s := New(Config{Store: e.st, Streams: streams, Clock: e.clock})
	t.Cleanup(func() { streams.Shutdown(); s.Close() })
	return s
}

// TestTicketOnAnotherReplica: a ticket asked of one replica opens the stream on another, once.
func TestTicketOnAnotherReplica(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	other := e.replica(t)
	tk, err := e.s.IssueTicket(ctx, ada)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := other.RedeemTicket(ctx, tk.Ticket); err != nil || p.User != "ada" {
		t.Fatalf("redeemed on the other replica: %+v, %v; want ada's", p, err)
	}
	if _, err := e.s.RedeemTicket(ctx, tk.Ticket); !errors.Is(err, ErrTicket) {
		t.Fatalf("then on the first: %v, want ErrTicket (used)", err)
	}
}

// TestDismiss: a person takes an item out of their own inbox for good, on every replica and in
// the live stream; nobody dismisses another's item, and an unknown item is said to be so.
func TestDismiss(t *testing.T) {
	e := newEnv(t, Config{Poll: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	polls := e.clock.Trap().NewTimer("fleet", "poll")
	defer polls.Close()
	failed := e.session(t, "s3", "ada", "box", store.TurnFailed)
	item := "turn_failed:" + failed.ID
	st, err := e.s.Stream(ctx, ada, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	polls.MustWait(ctx).MustRelease(ctx)
	if items := next(t, st); len(items) != 1 || !strings.Contains(string(items[0].Data), item) {
		t.Fatalf("snapshot %+v, want the failed turn in the inbox", items)
	}

	if err := e.s.Dismiss(ctx, bob, item); !errors.Is(err, ErrNoSuchItem) {
		t.Errorf("bob dismissing ada's item: %v, want ErrNoSuchItem", err)
	}
	if err := e.s.Dismiss(ctx, jobs, item); !errors.Is(err, ErrForbidden) {
		t.Errorf("a jobs token dismissing: %v, want ErrForbidden", err)
	}
	if err := e.s.Dismiss(ctx, ada, "turn_failed:nope"); !errors.Is(err, ErrNoSuchItem) {
		t.Errorf("an unknown item: %v, want ErrNoSuchItem", err)
	}
	if err := e.s.Dismiss(ctx, ada, item); err != nil {
		t.Fatalf("Dismiss: %v", err)
	}
	e.poll(ctx, t, polls)
	items := next(t, st)
	var events []string
	for _, it := range items {
		events = append(events, it.Event)
	}
	if strings.Join(events, ",") != "inbox,summary" || strings.Contains(string(items[0].Data), item) {
		t.Fatalf("after the dismissal: %v %s, want an inbox without it, and the summary", events, items[0].Data)
	}
	for name, s := range map[string]*Service{"this replica": e.s, "another replica": e.replica(t)} {
		f, err := s.Read(ctx, ada, "")
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(f.Inbox, func(it InboxItem) bool { return it.ID == item }) || f.Summary.Inbox != len(f.Inbox) {
			t.Errorf("%s still shows it: %+v (summary %d)", name, f.Inbox, f.Summary.Inbox)
		}
	}
	if err := e.s.Dismiss(ctx, ada, item); !errors.Is(err, ErrNoSuchItem) {
		t.Errorf("dismissing it again: %v, want ErrNoSuchItem", err)
	}
}

// TestEveryEventMovesActivity: an agent that only retries its API calls (Claude Code's
// system/api_retry) moves its unit's time with each, shows the retry as what it did last, and
// is not stuck; a line with nothing to show (a hook) still moves the time; a failed turn's
// reason is its last activity and in its inbox item.
func TestEveryEventMovesActivity(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	tu := e.session(t, "s1", "ada", "box", store.TurnRunning, toolCall)
	retry := `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2400,"error_status":529,"error":"overloaded"}`
	unitOf := func() Unit {
		t.Helper()
		f, err := e.s.Read(ctx, ada, "")
		if err != nil || len(f.Agents) != 1 {
			t.Fatalf("fleet %+v, %v", f, err)
		}
		return f.Agents[0]
	}
	// Each line within StuckAfter (10 minutes) of the one before, the last 16 minutes on.
	e.clock.Advance(8 * time.Minute).MustWait(ctx)
	e.appendLines(t, "s1", tu.ID, retry)
	e.clock.Advance(8 * time.Minute).MustWait(ctx)
	e.appendLines(t, "s1", tu.ID, `{"type":"system","subtype":"hook_started","hook_name":"x"}`)
	u := unitOf()
	if want := e.now.Add(16 * time.Minute); !time.Time(u.UpdatedAt).Equal(want) || u.Stuck {
		t.Errorf("updated %v, stuck %v; want %v (the hook's line), not stuck", time.Time(u.UpdatedAt), u.Stuck, want)
	}
	if u.Last == nil || u.Last.Kind != "retry" || u.Last.Text != "API call failed, retry 3 of 10: overloaded (HTTP 529), in 2.4s" {
		t.Errorf("last = %+v, want the retry", u.Last)
	}
	reason := "exit code 1: Not inside a trusted directory and --skip-git-repo-check was not specified."
	if err := e.st.UpdateTurn(ctx, store.TurnUpdate{ID: tu.ID, State: store.TurnFailed, Reason: reason, EndedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// The turn's end, as turns records it (appendLines gives every line the type "line").
	if _, err := e.st.AppendEvents(ctx, store.EventAppend{SessionID: "s1", TurnID: tu.ID, ReadPos: -1, Events: []store.Event{{TurnID: tu.ID,
		TS: e.clock.Now(), Type: "turn.finished", Data: []byte(`{"type":"turn.finished","status":"failed","exit_code":1,"reason":"` + reason + `"}`)}}}); err != nil {
		t.Fatal(err)
	}
	if u := unitOf(); u.Last == nil || u.Last.Kind != "error" || u.Last.Text != reason {
		t.Errorf("last after the failed turn = %+v, want its reason", u.Last)
	}
	f, _ := e.s.Read(ctx, ada, "")
	var saw bool
	for _, it := range f.Inbox {
		saw = saw || (it.Kind == "turn_failed" && it.Text == "A turn of n-s1 failed: "+reason)
	}
	if !saw {
		t.Errorf("inbox %+v, want the failed turn with its reason", f.Inbox)
	}
}
