package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	v.render(&out, false, now, screen{})
	for _, want := range []string{"ada's fleet: 1 agents (1 running), 1 in the inbox, $0.25 today", "fix", "$0.25", "tool_call: Bash",
		"turn_failed  a turn failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "old") {
		t.Errorf("the gone agent is still shown:\n%s", out.String())
	}
}

// TestFleetFitsTheTerminal: on an 80×24 terminal the fleet takes at most 23 lines (the last
// stays for the cursor) of at most 80 cells, colour codes aside; what does not fit is counted
// ("… N more"); the inbox's texts start in one column.
func TestFleetFitsTheTerminal(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *wire.Time { w := wire.Time(now.Add(-d)); return &w }
	v := fleetView{User: "ada", Agents: map[string]*wire.FleetUnit{},
		Summary: wire.FleetSummary{Agents: 30, ByState: map[string]int{"running": 29, "stuck": 1}, Stuck: 1, Inbox: 12}}
	for i := range 30 {
		id := fmt.Sprintf("job_%02dabcdefghijklmnopqrstuvwxyz", i)
		v.Agents[id] = &wire.FleetUnit{ID: id, Name: id, Kind: "job", State: "running", UpdatedAt: *at(time.Duration(i) * time.Second),
			Turn: &wire.TurnRef{ID: "t", State: "running", StartedAt: at(31*time.Minute + 4*time.Second)}, LastActivityAt: at(31 * time.Minute),
			Task: strings.Repeat("Fix the flaky test ", 5), Last: &wire.Activity{Kind: "tool_call", Text: strings.Repeat("go test ./... ", 9)}}
	}
	for i, kind := range []string{"stuck", "turn_done", "job_finished", "process_failed", "sandbox_failed", "turn_failed",
		"stuck", "turn_done", "job_finished", "process_failed", "sandbox_failed", "turn_failed"} {
		v.Inbox = append(v.Inbox, wire.InboxItem{ID: kind, Kind: kind, Text: strings.Repeat("needs you ", 12), At: *at(time.Duration(i*i) * time.Minute)})
	}
	var out bytes.Buffer
	v.render(&out, true, now, screen{cols: 80, rows: 24})
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) > 23 {
		t.Errorf("%d lines, want at most 23:\n%s", len(lines), out.String())
	}
	textAt := -1
	for _, l := range lines {
		if w := printedWidth(l); w > 80 {
			t.Errorf("a line of %d cells: %q", w, l)
		}
		if plain := ansiColour.ReplaceAllString(l, ""); strings.HasPrefix(plain, "  ") && strings.Contains(plain, "needs you") {
			if i := strings.Index(plain, "needs you"); textAt < 0 {
				textAt = i
			} else if i != textAt {
				t.Errorf("an inbox text starts at %d, the first at %d:\n%s", i, textAt, out.String())
			}
		}
	}
	for _, want := range []string{"more agents", "  … ", "31m04s, silent 31 min", "Inbox:\n  "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the screen lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Count(out.String(), "job_") < 5 || strings.Count(out.String(), "needs you") < 3 {
		t.Errorf("too few agents or items shown:\n%s", out.String())
	}
}

// TestFleetRowCells: a row says how long its agent ran or took, silent only past a minute, and
// what it cost or the tokens it used; the relative times move with the clock.
func TestFleetRowCells(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *wire.Time { w := wire.Time(now.Add(-d)); return &w }
	for _, c := range []struct {
		name       string
		u          wire.FleetUnit
		time, cost string
	}{
		{"idle", wire.FleetUnit{State: "idle"}, "", ""},
		{"queued", wire.FleetUnit{State: "queued", Turn: &wire.TurnRef{State: "queued"}}, "", ""},
		{"running, heard from", wire.FleetUnit{State: "running", Turn: &wire.TurnRef{StartedAt: at(3*time.Minute + 12*time.Second)}, LastActivityAt: at(50 * time.Second), CostUSD: 1.712}, "3m12s", "$1.71"},
		{"running, silent", wire.FleetUnit{State: "running", Turn: &wire.TurnRef{StartedAt: at(2 * time.Hour)}, LastActivityAt: at(31 * time.Minute)}, "2h00m, silent 31 min", ""},
		{"running, no event yet", wire.FleetUnit{State: "running", Turn: &wire.TurnRef{StartedAt: at(90 * time.Second)}}, "1m30s, silent 1 min", ""},
		{"done", wire.FleetUnit{State: "done", Turn: &wire.TurnRef{StartedAt: at(10 * time.Minute)}, EndedAt: at(6 * time.Minute), Tokens: &wire.Tokens{Input: 12000, Output: 345}}, "took 4m00s", "12.3k tok"},
	} {
		if got := howLong(&c.u, now); got != c.time {
			t.Errorf("%s: time %q, want %q", c.name, got, c.time)
		}
		if got := spent(&c.u); got != c.cost {
			t.Errorf("%s: cost %q, want %q", c.name, got, c.cost)
		}
	}
	u := wire.FleetUnit{State: "running", Turn: &wire.TurnRef{StartedAt: at(5 * time.Second)}}
	if a, b := howLong(&u, now), howLong(&u, now.Add(time.Second)); a != "5s" || b != "6s" {
		t.Errorf("a second later: %q then %q, want 5s then 6s", a, b)
	}
}
