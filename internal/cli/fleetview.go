package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
)

// Bounds of a fleet row's cells: wider ones are cut with "…", and the line at the screen's
// width.
const (
	nameCells = 24
	taskCells = 32
	lastCells = 60
)

// screen is where the fleet is drawn: its size in cells; 0 for no bound.
type screen struct{ cols, rows int }

// render writes the fleet as a person reads it: the summary, the agents newest change first,
// the inbox, cut to fit sc (each part ends with "… N more" when it does not fit).
func (v *fleetView) render(w io.Writer, col bool, now time.Time, sc screen) {
	var lines []string
	lines = append(lines, v.headline(col), "")
	agents := v.sorted()
	inbox := v.inboxLines(col, now)
	nAgents, nInbox := len(agents), len(inbox)
	if sc.rows > 0 {
		// The last row stays free for the cursor; the headline, a blank and the table's header
		// take three.
		nAgents, nInbox = fit(sc.rows-1-3, len(agents), len(inbox))
	}
	t := newTable(nil, "NAME", "STATE", "TIME", "COST", "TASK", "LAST")
	for _, ag := range agents[:nAgents] {
		t.row(v.cells(ag, col, now)...)
	}
	lines = append(lines, tableLines(t)...)
	if more := len(agents) - nAgents; more > 0 {
		lines = append(lines, fmt.Sprintf("… %d more agents", more))
	}
	if len(inbox) > 0 {
		lines = append(lines, "", "Inbox:")
		lines = append(lines, inbox[:nInbox]...)
		if more := len(inbox) - nInbox; more > 0 {
			lines = append(lines, fmt.Sprintf("  … %d more", more))
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(cut(l, sc.cols, col))
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// fit shares rows between a agents and b inbox items: how many of each are shown, when each
// part cut takes a line more ("… N more") and the inbox two ("", "Inbox:"). The larger part
// gives way first.
func fit(rows, a, b int) (int, int) {
	na, nb := a, b
	need := func() int {
		n := na
		if na < a {
			n++
		}
		if b > 0 {
			n += 2 + nb
			if nb < b {
				n++
			}
		}
		return n
	}
	for need() > rows && na+nb > 0 {
		if na >= nb && na > 0 {
			na--
		} else {
			nb--
		}
	}
	return na, nb
}

// headline is the summary in one line.
func (v *fleetView) headline(col bool) string {
	states := make([]string, 0, len(v.Summary.ByState))
	for st, n := range v.Summary.ByState {
		states = append(states, fmt.Sprintf("%d %s", n, paint(col, stateColour(st), st)))
	}
	sort.Strings(states)
	byState := ""
	if len(states) > 0 {
		byState = " (" + strings.Join(states, ", ") + ")"
	}
	return fmt.Sprintf("%s's fleet: %d agents%s, %d in the inbox, $%.2f today", v.User, v.Summary.Agents, byState, v.Summary.Inbox, v.Summary.CostTodayUSD)
}

// sorted is the agents, the latest changed first.
func (v *fleetView) sorted() []*wire.FleetUnit {
	agents := make([]*wire.FleetUnit, 0, len(v.Agents))
	for _, ag := range v.Agents {
		agents = append(agents, ag)
	}
	sort.Slice(agents, func(i, j int) bool { return time.Time(agents[i].UpdatedAt).After(time.Time(agents[j].UpdatedAt)) })
	return agents
}

// cells is ag's row.
func (v *fleetView) cells(ag *wire.FleetUnit, col bool, now time.Time) []string {
	state := ag.State
	if ag.Stuck {
		state = "stuck"
	}
	last := ""
	if ag.Last != nil {
		last = ag.Last.Kind + ": " + ag.Last.Text
	}
	return []string{oneLine(ag.Name, nameCells), paint(col, stateColour(state), state), howLong(ag, now), spent(ag),
		oneLine(ag.Task, taskCells), oneLine(last, lastCells)}
}

// inboxLines are the inbox's items, their times and kinds in aligned columns.
func (v *fleetView) inboxLines(col bool, now time.Time) []string {
	if len(v.Inbox) == 0 {
		return nil
	}
	t := &table{} // no header
	for _, it := range v.Inbox {
		t.row("", ago(time.Time(it.At), now), paint(col, "33", it.Kind), oneLine(it.Text, 200))
	}
	return tableLines(t)
}

// tableLines are t's lines, each without its line end.
func tableLines(t *table) []string {
	var b strings.Builder
	t.w = &b
	t.flush()
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// howLong is how long ag has run, and how long it has been silent when over a minute; or how
// long its turn took.
func howLong(ag *wire.FleetUnit, now time.Time) string {
	if ag.Turn == nil {
		return ""
	}
	start := time.Time(ag.StartedAt)
	if ag.Turn.StartedAt != nil {
		start = time.Time(*ag.Turn.StartedAt)
	}
	if ag.EndedAt != nil {
		return "took " + span(time.Time(*ag.EndedAt).Sub(start))
	}
	if ag.Turn.StartedAt == nil { // queued
		return ""
	}
	text := span(now.Sub(start))
	heard := start
	if ag.LastActivityAt != nil && time.Time(*ag.LastActivityAt).After(heard) {
		heard = time.Time(*ag.LastActivityAt)
	}
	if quiet := now.Sub(heard); quiet > time.Minute {
		text += fmt.Sprintf(", silent %d min", int(quiet.Minutes()))
	}
	return text
}

// span is d for a person, to the second under an hour: "45s", "3m12s", "1h05m", "2d3h".
func span(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours()/24), int(d.Hours())%24)
}

// spent is ag's cost, or its tokens when it reports no cost (Codex).
func spent(ag *wire.FleetUnit) string {
	switch {
	case ag.CostUSD > 0:
		return fmt.Sprintf("$%.2f", ag.CostUSD)
	case ag.Tokens != nil:
		n := ag.Tokens.Input + ag.Tokens.Output
		if n >= 1000 {
			return fmt.Sprintf("%.1fk tok", float64(n)/1000)
		}
		return fmt.Sprintf("%d tok", n)
	}
	return ""
}

// cut shortens line to cols printed cells (0: no bound), ending it with "…"; the colour codes
// paint added take no cell, and one cut inside a colour is closed.
func cut(line string, cols int, col bool) string {
	if cols <= 0 || printedWidth(line) <= cols {
		return line
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(line); {
		if loc := ansiColour.FindStringIndex(line[i:]); loc != nil && loc[0] == 0 {
			b.WriteString(line[i : i+loc[1]])
			i += loc[1]
			continue
		}
		if n == cols-1 {
			break
		}
		r := []rune(line[i:])[0]
		b.WriteRune(r)
		i += len(string(r))
		n++
	}
	b.WriteString("…")
	if col {
		b.WriteString("\x1b[0m")
	}
	return b.String()
}
