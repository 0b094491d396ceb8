package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
)

func (a *app) logsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs SESSION",
		Short: "print a session's events, made readable; -f follows new ones",
		Long: `logs prints a session's events (by name or id): what the agent said, the tools it called
with their commands, their results, the turn's result and cost. -f goes on with each new event as
it is recorded, until Ctrl-C. -o json prints the events as hangar gives them, one JSON per line.`,
		Example:           "  hangar logs chat -f",
		Args:              exactArgs(1, "a session's name or id"),
		ValidArgsFunction: a.completeSessions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.events(cmd.Context(), "/api/sessions/"+esc(args[0])+"/events", 0, follow, nil)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow new events as they are recorded")
	a.outputFlag(cmd)
	return cmd
}

// events prints the events at base (a session's or a job's events route) after seq since: the
// pages recorded or, with follow, the stream, until an event for which until says so (nil:
// until Ctrl-C).
func (a *app) events(ctx context.Context, base string, since int64, follow bool, until func(wire.Event) bool) error {
	asJSON, c, err := a.jsonClient()
	if err != nil {
		return err
	}
	p := &eventPrinter{w: a.cfg.Stdout, colour: a.colour(a.cfg.Stdout)}
	show := func(raw json.RawMessage) (last bool) {
		var ev wire.Event
		json.Unmarshal(raw, &ev)
		if asJSON {
			var line bytes.Buffer
			json.Compact(&line, raw) // one event a line
			fmt.Fprintf(a.cfg.Stdout, "%s\n", line.Bytes())
		} else {
			p.print(ev)
		}
		return until != nil && until(ev)
	}
	if !follow {
		for {
			var page struct {
				Events []json.RawMessage `json:"events"`
				Next   int64             `json:"next"`
			}
			if err := c.do(ctx, "GET", base+"?limit=1000&since="+strconv.FormatInt(since, 10), nil, &page); err != nil {
				return err
			}
			for _, raw := range page.Events {
				show(raw)
			}
			if len(page.Events) == 0 || page.Next == since {
				return nil
			}
			since = page.Next
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	return a.followEvents(ctx, c, base+"/stream?since="+strconv.FormatInt(since, 10), func(ev event) error {
		if show(ev.Data) {
			stop()
		}
		return nil
	})
}

// followTurn prints the events at base after seq since until one for which until says the turn
// ended, then exits 1 unless the turn (or job) at path ended done; Ctrl-C exits 130.
func (a *app) followTurn(ctx context.Context, c *client, base string, since int64, until func(wire.Event) bool, path string) error {
	if err := a.events(ctx, base, since, true, until); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	var t struct {
		State string `json:"state"`
	}
	if err := c.do(ctx, "GET", path, nil, &t); err != nil {
		return err
	}
	if t.State != "done" {
		return ExitCode(1)
	}
	return nil
}

// turnFinished is the end of a job's events: its one turn's turn.finished.
func turnFinished(ev wire.Event) bool { return ev.Type == "turn.finished" }

func (a *app) jobsCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "jobs",
		Aliases: []string{"job"},
		Short:   "run an agent on a task unattended, list jobs, read their events",
	})
	a.outputFlag(cmd)
	cmd.AddCommand(a.jobsRunCmd(), a.jobsLsCmd(), a.jobsLogsCmd(), a.jobsCancelCmd())
	return cmd
}

func (a *app) jobsRunCmd() *cobra.Command {
	var agent, sandbox, provider, image string
	var follow bool
	cmd := &cobra.Command{
		Use:   "run [flags] PROMPT",
		Short: "start a job: an agent's turn on PROMPT in a sandbox; prints the job's id",
		Long: `run starts a job: the agent (claude-code, codex, or command, whose prompt is a bash command)
gets PROMPT in the sandbox --sandbox names, or in a new one (--provider, --image) when it names
none. It prints the job's id; -f follows its events until its turn ends, and exits 1 if the turn
did not end done.`,
		Example: `  hangar jobs run --agent command --sandbox demo -f 'echo {"type":"result","result":"hi"}'`,
		Args:    exactArgs(1, "the prompt"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			req := map[string]any{"prompt": args[0], "agent": agent}
			if sandbox != "" {
				req["sandbox"] = sandbox
			} else {
				spec := map[string]any{}
				if provider != "" {
					spec["provider"] = provider
				}
				if image != "" {
					spec["image"] = image
				}
				req["sandbox"] = spec
			}
			var raw json.RawMessage
			if err := c.do(cmd.Context(), "POST", "/api/jobs", req, &raw); err != nil {
				return err
			}
			var j wire.Job
			json.Unmarshal(raw, &j)
			switch {
			case asJSON && !follow:
				return printJSON(a.cfg.Stdout, raw)
			case !follow:
				fmt.Fprintln(a.cfg.Stdout, j.ID)
				return nil
			}
			fmt.Fprintf(a.cfg.Stderr, "Job %s in sandbox %s.\n", j.ID, j.Sandbox)
			return a.followTurn(cmd.Context(), c, "/api/jobs/"+esc(j.ID)+"/events", 0, turnFinished, "/api/jobs/"+esc(j.ID))
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "claude-code", "claude-code, codex or command")
	f.StringVar(&sandbox, "sandbox", "", "the sandbox to run in (default: a new one)")
	f.StringVar(&provider, "provider", "", "the new sandbox's provider")
	f.StringVar(&image, "image", "", "the new sandbox's image")
	f.BoolVarP(&follow, "follow", "f", false, "follow its events until its turn ends")
	cmd.RegisterFlagCompletionFunc("sandbox", a.completeSandboxFlag)
	return cmd
}

func (a *app) jobsLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "list the jobs you can see",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			col, now := a.colour(a.cfg.Stdout), time.Now()
			header := []string{"ID", "STATE", "SANDBOX", "CREATED", "PROMPT"}
			return printList(cmd.Context(), a, "/api/jobs", "jobs", header, func(j wire.Job) []string {
				prompt := ""
				if j.Turn != nil {
					prompt = oneLine(j.Turn.Prompt, 60)
				}
				return []string{j.ID, paint(col, stateColour(j.State), j.State), j.Sandbox, ago(j.CreatedAt.Time(), now), prompt}
			})
		},
	}
}

func (a *app) jobsLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:               "logs [flags] ID",
		Short:             "print a job's events, made readable; -f follows them until its turn ends",
		Args:              exactArgs(1, "a job's id"),
		ValidArgsFunction: a.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.events(cmd.Context(), "/api/jobs/"+url.PathEscape(args[0])+"/events", 0, follow, turnFinished)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow its events until its turn ends")
	return cmd
}
