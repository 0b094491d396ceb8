package fleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/stamp"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/turns"
)

// TestFleetJSON pins the bytes a client sees of a fleet (a snapshot's data; its agent and inbox
// events carry the same units and items) and of a ticket: times in UTC with exactly milliseconds.
func TestFleetJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 120_456_789, time.FixedZone("CET", 3600))
	fl := Fleet{User: "ada",
		Agents: []Unit{{ID: "s1", Name: "fix", Kind: "session", Agent: "claude", Sandbox: "box", SandboxState: "running",
			State: "done", Turn: &TurnRef{ID: "t1", State: "done", StartedAt: stamp.Of(at)}, Task: "Fix the tests",
			Last: &Activity{Kind: "tool_call", Text: "Bash", At: stamp.Time(at)}, Tokens: &Tokens{Input: 1200, Output: 34},
			StartedAt: stamp.Time(at), EndedAt: stamp.Of(at.Add(time.Minute)), UpdatedAt: stamp.Time(at.Add(time.Minute)), LastActivityAt: stamp.Of(at.Add(time.Second))}},
		Inbox:   []InboxItem{{ID: "turn_failed:t0", Kind: "turn_failed", State: "failed", Agent: "s1", Text: "failed", At: stamp.Time(at)}},
		Summary: Summary{Agents: 1, ByState: map[string]int{"running": 1}, CostTodayUSD: 0.25}}
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"fleet", fl, `{"user":"ada","agents":[{"id":"s1","name":"fix","kind":"session","agent":"claude","sandbox":"box","sandbox_state":"running","state":"done","turn":{"id":"t1","state":"done","started_at":"2026-01-02T02:04:05.120Z"},"task":"Fix the tests","last":{"kind":"tool_call","text":"Bash","at":"2026-01-02T02:04:05.120Z"},"cost_usd":0,"tokens":{"input":1200,"output":34},"started_at":"2026-01-02T02:04:05.120Z","ended_at":"2026-01-02T02:05:05.120Z","updated_at":"2026-01-02T02:05:05.120Z","last_activity_at":"2026-01-02T02:04:06.120Z"}],"inbox":[{"id":"turn_failed:t0","kind":"turn_failed","state":"failed","agent":"s1","text":"failed","at":"2026-01-02T02:04:05.120Z"}],"summary":{"agents":1,"by_state":{"running":1},"stuck":0,"inbox":0,"cost_today_usd":0.25}}`},
		{"ticket", Ticket{Ticket: "tk", ExpiresAt: stamp.Time(at.Truncate(time.Second))}, `{"ticket":"tk","expires_at":"2026-01-02T02:04:05.000Z"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.name, b, err, c.want)
		}
	}
}

// TestFailedReasonFromOlderRows: a turn.finished row whose other fields have other types (an
// older agent's log line recorded under that type) still gives the failed turn's reason.
func TestFailedReasonFromOlderRows(t *testing.T) {
	t.Parallel()
	sc := &sessionCache{costs: map[string]float64{}, turnAt: -1}
	sc.take(store.Event{Seq: 1, TS: time.Unix(1, 0), Type: turns.TypeTurnFinished,
		Data: []byte(`{"status":"failed","reason":"out of memory","exit_code":"1","turn":7}`)})
	if sc.last == nil || sc.last.Text != "out of memory" {
		t.Errorf("last activity = %+v, want the failed turn's reason", sc.last)
	}
}
