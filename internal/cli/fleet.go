package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
	"golang.org/x/term"
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

func (a *app) fleetCmd() *cobra.Command {
	var once, web bool
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "your agents at a glance, live: a table redrawn as they change",
		Long: `fleet shows your sessions and jobs, their state, what they did last and their cost, and the
inbox of what needs you, redrawn on a terminal as the fleet stream changes (until Ctrl-C).
Elsewhere it prints the table again after each change. --once prints it once and exits; -o json
prints the stream's events, one JSON a line ({"event", "id", "data"}), or with --once the fleet.
--web opens the Fleet page in your browser instead, signed in as you by a link that works once,
within a minute (no token to paste); with no browser to start ($BROWSER, xdg-open) it prints
the link.`,
		Example: "  hangar fleet\n  hangar fleet --once -o json\n  hangar fleet --web",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			if web {
				if once || asJSON {
					return usageError{"--web opens the page: it goes with neither --once nor -o json"}
				}
				return a.fleetWeb(cmd.Context(), c)
			}
			if once {
				return a.fleetOnce(cmd.Context(), c, asJSON)
			}
			return a.fleetLive(cmd.Context(), c, asJSON)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print the fleet once and exit")
	cmd.Flags().BoolVar(&web, "web", false, "open the Fleet page in your browser, signed in as you (a link that works once)")
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
	v.render(a.cfg.Stdout, a.colour(a.cfg.Stdout), time.Now(), screenOf(a.cfg.Stdout))
	return nil
}

// screenOf is the size of the terminal w is, or no bound.
func screenOf(w any) screen {
	fd, ok := fdOf(w)
	if !ok {
		return screen{}
	}
	cols, rows, err := term.GetSize(fd)
	if err != nil {
		return screen{}
	}
	return screen{cols: cols, rows: rows}
}

// fleetLive follows the fleet stream, opened with a one-time ticket (docs/fleet.md), each time
// with a new one: after a dropped connection it resumes from the last event's id. On a
// terminal the fleet is redrawn, to its size, on each change and each second (its times tick).
func (a *app) fleetLive(ctx context.Context, c *client, asJSON bool) error {
	term := isTerminal(a.cfg.Stdout)
	var mu sync.Mutex // guards v: the stream's events and the ticker both draw it
	var v fleetView
	draw := func(redraw bool) {
		var out bytes.Buffer
		if term {
			out.WriteString("\x1b[H\x1b[2J") // home, clear: the whole table again
		} else if redraw {
			out.WriteString("\n")
		}
		v.render(&out, a.colour(a.cfg.Stdout), time.Now(), screenOf(a.cfg.Stdout))
		a.cfg.Stdout.Write(out.Bytes())
	}
	if term && !asJSON {
		tick := time.NewTicker(time.Second)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-tick.C:
				case <-done:
					return
				}
				mu.Lock()
				if v.Agents != nil { // once the snapshot came
					draw(true)
				}
				mu.Unlock()
			}
		}()
		defer func() {
			tick.Stop()
			close(done)
			wg.Wait()
		}()
	}
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
			mu.Lock()
			v.apply(ev)
			draw(ev.Name != "snapshot")
			mu.Unlock()
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
