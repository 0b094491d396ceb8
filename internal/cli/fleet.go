package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
)

// fleetView is the fleet as the stream has told it so far.
type fleetView struct {
	User    string
	Agents  map[string]*wire.FleetUnit // by id
	Inbox   []wire.InboxItem
	Summary wire.FleetSummary
}

// apply changes v by one fleet stream event.
func (v *fleetView) apply(ev event) {
	switch ev.Name {
	case "snapshot":
		var snap wire.FleetSnapshot
		json.Unmarshal(ev.Data, &snap)
		v.User, v.Inbox, v.Summary = snap.User, snap.Inbox, snap.Summary
		v.Agents = map[string]*wire.FleetUnit{}
		for i := range snap.Agents {
			v.Agents[snap.Agents[i].ID] = &snap.Agents[i]
		}
	case "agent":
		var ag wire.FleetUnit
		if json.Unmarshal(ev.Data, &ag) == nil && v.Agents != nil {
			v.Agents[ag.ID] = &ag
		}
	case "gone":
		var g wire.FleetGone
		json.Unmarshal(ev.Data, &g)
		delete(v.Agents, g.ID)
	case "inbox":
		var in wire.FleetInbox
		json.Unmarshal(ev.Data, &in)
		v.Inbox = in.Inbox
	case "summary":
		json.Unmarshal(ev.Data, &v.Summary)
	}
}

// render writes the fleet as a person reads it: the summary, the agents newest change first,
// the inbox.
func (v *fleetView) render(w io.Writer, col bool, now time.Time) {
	states := make([]string, 0, len(v.Summary.ByState))
	for st, n := range v.Summary.ByState {
		states = append(states, fmt.Sprintf("%d %s", n, paint(col, stateColour(st), st)))
	}
	sort.Strings(states)
	byState := ""
	if len(states) > 0 {
		byState = " (" + strings.Join(states, ", ") + ")"
	}
	fmt.Fprintf(w, "%s's fleet: %d agents%s, %d stuck, %d in the inbox, $%.2f today\n\n", v.User, v.Summary.Agents, byState, v.Summary.Stuck, v.Summary.Inbox, v.Summary.CostTodayUSD)
	agents := make([]*wire.FleetUnit, 0, len(v.Agents))
	for _, ag := range v.Agents {
		agents = append(agents, ag)
	}
	sort.Slice(agents, func(i, j int) bool { return time.Time(agents[i].UpdatedAt).After(time.Time(agents[j].UpdatedAt)) })
	t := newTable(w, "NAME", "KIND", "STATE", "SANDBOX", "COST", "UPDATED", "LAST")
	for _, ag := range agents {
		state := ag.State
		if ag.Stuck {
			state = "stuck"
		}
		last := ""
		if ag.Last != nil {
			last = ag.Last.Kind + ": " + oneLine(ag.Last.Text, 60)
		}
		t.row(ag.Name, ag.Kind, paint(col, stateColour(state), state), ag.Sandbox, fmt.Sprintf("$%.2f", ag.CostUSD), ago(time.Time(ag.UpdatedAt), now), last)
	}
	t.flush()
	if len(v.Inbox) > 0 {
		fmt.Fprintln(w, "\nInbox:")
		for _, it := range v.Inbox {
			fmt.Fprintf(w, "  %s  %s  %s\n", ago(time.Time(it.At), now), paint(col, "33", it.Kind), oneLine(it.Text, 100))
		}
	}
}

func (a *app) fleetCmd() *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "your agents at a glance, live: a table redrawn as they change",
		Long: `fleet shows your sessions and jobs, their state, what they did last and their cost, and the
inbox of what needs you, redrawn on a terminal as the fleet stream changes (until Ctrl-C).
Elsewhere it prints the table again after each change. --once prints it once and exits; -o json
prints the stream's events, one JSON a line ({"event", "id", "data"}), or with --once the fleet.`,
		Example: "  hangar fleet\n  hangar fleet --once -o json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			if once {
				return a.fleetOnce(cmd.Context(), c, asJSON)
			}
			return a.fleetLive(cmd.Context(), c, asJSON)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print the fleet once and exit")
	a.outputFlag(cmd)
	return cmd
}

func (a *app) fleetOnce(ctx context.Context, c *client, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(ctx, "GET", "/api/fleet", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.cfg.Stdout, raw)
	}
	var v fleetView
	v.apply(event{Name: "snapshot", Data: raw})
	v.render(a.cfg.Stdout, a.colour(a.cfg.Stdout), time.Now())
	return nil
}

// fleetLive follows the fleet stream, opened with a one-time ticket (docs/fleet.md), each time
// with a new one: after a dropped connection it resumes from the last event's id.
func (a *app) fleetLive(ctx context.Context, c *client, asJSON bool) error {
	term := isTerminal(a.cfg.Stdout)
	col := a.colour(a.cfg.Stdout)
	var v fleetView
	lastID := ""
	r := newReconnect(a.cfg.Stderr)
	for {
		err := a.fleetStream(ctx, c, lastID, func(ev event) {
			lastID = ev.ID
			if asJSON {
				var line bytes.Buffer
				json.Compact(&line, ev.Data)
				fmt.Fprintf(a.cfg.Stdout, `{"event":%q,"id":%q,"data":%s}`+"\n", ev.Name, ev.ID, line.Bytes())
				return
			}
			v.apply(ev)
			var screen bytes.Buffer
			if term {
				screen.WriteString("\x1b[H\x1b[2J") // home, clear: the whole table again
			} else if ev.Name != "snapshot" {
				screen.WriteString("\n")
			}
			v.render(&screen, col, time.Now())
			a.cfg.Stdout.Write(screen.Bytes())
			r.reset()
		})
		if again, err := r.wait(ctx, err); !again {
			return err
		}
	}
}

// fleetStream asks for a ticket, opens the stream with it from since, and calls fn for each
// event until the stream ends.
func (a *app) fleetStream(ctx context.Context, c *client, since string, fn func(event)) error {
	var t wire.Ticket
	if err := c.do(ctx, "POST", "/api/fleet/tickets", nil, &t); err != nil {
		return err
	}
	q := url.Values{"ticket": {t.Ticket}}
	if since != "" {
		q.Set("since", since)
	}
	anon := newClient(c.base, "") // the ticket stands for the token
	sse, body, err := anon.stream(ctx, "GET", "/api/fleet/stream?"+q.Encode(), nil, "")
	if err != nil {
		return err
	}
	defer body.Close()
	return sse.each("lost the fleet stream", func(ev event) error {
		fn(ev)
		return nil
	})
}
