package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/wire"
)

func (a *app) sessionsCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel SESSION [TURN]",
		Short: "cancel a session's turn (default: the one running) and wait until it has ended",
		Long: `cancel stops a turn of the session (by name or id): a queued one ends at once, a running
one's agent gets SIGTERM (SIGKILL after a grace), and cancel waits until the turn has ended, as
docker stop does. Without TURN it cancels the turn the session is running, and fails when it runs
none. A turn that has already ended is left as it is.`,
		Example:           "  hangar sessions cancel chat",
		Args:              argsBetween(1, 2, "a session's name or id, and optionally a turn's id"),
		ValidArgsFunction: a.completeSessionTurn,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var se wire.Session
			if err := a.call(ctx, "GET", "/api/sessions/"+esc(args[0]), nil, &se); err != nil {
				return err
			}
			turn, err := a.turnToCancel(ctx, se, args[1:])
			if err != nil {
				return err
			}
			path := "/api/sessions/" + esc(se.ID) + "/turns/" + esc(turn)
			what := "turn " + turn + " of session " + se.Name
			return cancelAndWait(ctx, a, what, path+"/cancel", path, "/api/sessions/"+esc(se.ID)+"/events", se.LastSeq,
				func(t wire.Turn) *wire.Turn { return &t }, func(t wire.Turn) { a.sayCancelled(what, t.State) })
		},
	}
}

func (a *app) jobsCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB",
		Short: "cancel a job's turn and wait until it has ended",
		Long: `cancel stops a job's turn: a queued one ends at once, a running one's agent gets SIGTERM
(SIGKILL after a grace), and cancel waits until the turn has ended, as docker stop does. A job that
has already ended is left as it is.`,
		Example:           "  hangar jobs cancel job_…",
		Args:              exactArgs(1, "a job's id"),
		ValidArgsFunction: a.completeJobs(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/jobs/" + esc(args[0])
			what := "job " + args[0]
			return cancelAndWait(cmd.Context(), a, what, path+"/cancel", path, path+"/events", 0,
				func(j wire.Job) *wire.Turn { return j.Turn }, func(j wire.Job) { a.sayCancelled(what, j.State) })
		},
	}
}

// argsBetween is cobra.RangeArgs with a usage error naming what is wanted.
func argsBetween(least, most int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < least || len(args) > most {
			return usageError{fmt.Sprintf("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))}
		}
		return nil
	}
}

// turnToCancel is the turn named, if one is, else the id of the turn se is running (or has
// queued), or an error that says it has none.
func (a *app) turnToCancel(ctx context.Context, se wire.Session, named []string) (string, error) {
	if len(named) == 1 {
		return named[0], nil
	}
	var out struct {
		Turns []wire.Turn `json:"turns"`
	}
	if err := a.call(ctx, "GET", "/api/sessions/"+esc(se.ID)+"/turns", nil, &out); err != nil {
		return "", err
	}
	for _, t := range out.Turns {
		if !turnEnded(t.State) {
			return t.ID, nil
		}
	}
	return "", fmt.Errorf("session %s is running no turn: there is nothing to cancel", se.Name)
}

// turnEnded says whether a turn (or job) in state has ended.
func turnEnded(state string) bool { return state != "queued" && state != "running" }

// cancelAndWait cancels with POST cancelPath and, unless hangar's answer (a T) holds a turn that
// has ended, waits for the turn's turn.finished in the events at events after seq since — as
// docker stop waits for its container — and then reads the T at getPath. It prints the last T:
// with -o json as hangar gave it, else as human says it. Ctrl-C while it waits exits 130.
func cancelAndWait[T any](ctx context.Context, a *app, what, cancelPath, getPath, events string, since int64,
	turnOf func(T) *wire.Turn, human func(T)) error {
	asJSON, c, err := a.jsonClient()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "POST", cancelPath, nil, &raw); err != nil {
		return err
	}
	var v T
	json.Unmarshal(raw, &v)
	if t := turnOf(v); t != nil && !turnEnded(t.State) {
		s := a.spin("cancelling " + what)
		err := a.waitTurnFinished(ctx, c, events, since, t.ID)
		s.stop()
		if err != nil {
			return err
		}
		if err := c.do(ctx, "GET", getPath, nil, &raw); err != nil {
			return err
		}
		v = *new(T)
		json.Unmarshal(raw, &v)
	}
	if asJSON {
		return printJSON(a.cfg.Stdout, raw)
	}
	human(v)
	return nil
}

// waitTurnFinished follows the events at base after seq since until turn's turn.finished.
func (a *app) waitTurnFinished(ctx context.Context, c *client, base string, since int64, turn string) error {
	follow, stop := context.WithCancel(ctx)
	defer stop()
	err := a.followEvents(follow, c, base+"/stream?since="+strconv.FormatInt(since, 10), func(ev event) error {
		var e wire.Event
		json.Unmarshal(ev.Data, &e)
		if e.Type == "turn.finished" && e.Turn == turn {
			stop()
		}
		return nil
	})
	if err == nil && ctx.Err() != nil {
		return exitInterrupted
	}
	return err
}

// sayCancelled says how the cancel of what (a turn, a job) ended: in state.
func (a *app) sayCancelled(what, state string) {
	if state == "cancelled" {
		fmt.Fprintf(a.cfg.Stdout, "Cancelled %s.\n", what)
		return
	}
	fmt.Fprintf(a.cfg.Stdout, "Did not cancel %s: it had ended %s.\n", what, state)
}
