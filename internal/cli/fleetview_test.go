package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
)

// TestFleetViewReadsWire: the fleet view reads each fleet stream event as wire writes it — a
// snapshot, a changed agent, a gone one, the inbox, the summary — and the table shows the
// result.
func TestFleetViewReadsWire(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := wire.Time(now.Add(-2 * time.Minute))
	unit := func(id, name, state string) wire.FleetUnit {
		return wire.FleetUnit{ID: id, Name: name, Kind: "session", Agent: "claude", Sandbox: "box", State: state, UpdatedAt: at}
	}
	ev := func(name string, v any) event {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return event{Name: name, Data: b}
	}
	var v fleetView
	for _, e := range []event{
		ev("snapshot", wire.FleetSnapshot{Fleet: wire.Fleet{User: "ada", Agents: []wire.FleetUnit{unit("s1", "fix", "idle"), unit("s2", "old", "idle")}}}),
		ev("agent", func() wire.FleetUnit {
			u := unit("s1", "fix", "running")
			u.Last, u.CostUSD = &wire.Activity{Kind: "tool_call", Text: "Bash", At: at}, 0.25
			return u
		}()),
		ev("gone", wire.FleetGone{ID: "s2"}),
		ev("inbox", wire.FleetInbox{Inbox: []wire.InboxItem{{ID: "turn_failed:t0", Kind: "turn_failed", Text: "a turn failed", At: at}}}),
		ev("summary", wire.FleetSummary{Agents: 1, ByState: map[string]int{"running": 1}, Inbox: 1, CostTodayUSD: 0.25}),
	} {
		v.apply(e)
	}
	var out bytes.Buffer
	v.render(&out, false, now)
	for _, want := range []string{"ada's fleet: 1 agents (1 running), 0 stuck, 1 in the inbox, $0.25 today", "fix", "$0.25", "tool_call: Bash",
		"turn_failed  a turn failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "old") {
		t.Errorf("the gone agent is still shown:\n%s", out.String())
	}
}
