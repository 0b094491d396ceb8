package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
)

func (a *app) sessionsCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "sessions",
		Aliases: []string{"session"},
		Short:   "make, list and delete agent sessions; give one a turn",
	})
	a.outputFlag(cmd)
	cmd.AddCommand(a.sessionsCreateCmd(), a.sessionsLsCmd(), a.sessionsRmCmd(), a.sessionsTurnCmd(), a.sessionsCancelCmd())
	return cmd
}

func (a *app) sessionsCreateCmd() *cobra.Command {
	var req struct {
		Name    string            `json:"name"`
		Sandbox string            `json:"sandbox"`
		Agent   string            `json:"agent"`
		Env     map[string]string `json:"env,omitempty"`
	}
	cmd := &cobra.Command{
		Use:     "create NAME --sandbox SANDBOX",
		Short:   "make a session of an agent in a sandbox",
		Example: "  hangar sessions create chat --sandbox demo --agent command",
		Args:    exactArgs(1, "the session's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			var raw json.RawMessage
			if err := a.call(cmd.Context(), "POST", "/api/sessions", req, &raw); err != nil {
				return err
			}
			return a.printSessions(cmd.Context(), []json.RawMessage{raw})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Sandbox, "sandbox", "", "the sandbox it works in (required)")
	f.StringVar(&req.Agent, "agent", "claude-code", "claude-code, codex or command")
	f.StringToStringVar(&req.Env, "env", nil, "environment for the agent (API keys), KEY=VALUE; never shown again")
	cmd.MarkFlagRequired("sandbox")
	cmd.RegisterFlagCompletionFunc("sandbox", a.completeSandboxFlag)
	return cmd
}

func (a *app) sessionsLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "list your sessions (an admin's: everyone's)",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Sessions []json.RawMessage `json:"sessions"`
			}
			if err := a.call(cmd.Context(), "GET", "/api/sessions", nil, &out); err != nil {
				return err
			}
			return a.printSessions(cmd.Context(), out.Sessions)
		},
	}
}

func (a *app) sessionsRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "rm SESSION",
		Short:             "delete a session, its turns and events",
		Args:              exactArgs(1, "a session's name or id"),
		ValidArgsFunction: a.completeSessions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.call(cmd.Context(), "DELETE", "/api/sessions/"+esc(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.cfg.Stdout, "Deleted %s.\n", args[0])
			return nil
		},
	}
}

func (a *app) sessionsTurnCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "turn [flags] SESSION PROMPT",
		Short: "give a session a turn with PROMPT; prints the turn's id, or with -f follows it",
		Long: `turn starts a turn of the session's agent with PROMPT and prints its id. -f follows the
turn's events, made readable as logs shows them, until it ends, and exits 1 unless it ended done.`,
		Example:           `  hangar sessions turn -f chat 'echo "{\"type\":\"result\",\"result\":\"hi\"}"'`,
		Args:              exactArgs(2, "a session's name or id and a prompt"),
		ValidArgsFunction: a.completeSessions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.turn(cmd.Context(), args[0], args[1], follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the turn's events until it ends")
	return cmd
}

// turn starts a turn of session with prompt; with follow it prints the session's events from
// the last one before the turn until the turn's turn.finished.
func (a *app) turn(ctx context.Context, session, prompt string, follow bool) error {
	asJSON, err := a.json()
	if err != nil {
		return err
	}
	var se wire.Session
	if err := a.call(ctx, "GET", "/api/sessions/"+esc(session), nil, &se); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := a.call(ctx, "POST", "/api/sessions/"+esc(session)+"/turns", map[string]string{"prompt": prompt}, &raw); err != nil {
		return err
	}
	var t struct {
		ID string `json:"id"`
	}
	json.Unmarshal(raw, &t)
	if !follow {
		if asJSON {
			return printJSON(a.cfg.Stdout, raw)
		}
		fmt.Fprintln(a.cfg.Stdout, t.ID)
		return nil
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	ours := func(ev wire.Event) bool { return ev.Type == "turn.finished" && ev.Turn == t.ID }
	return a.followTurn(ctx, c, "/api/sessions/"+esc(se.ID)+"/events", se.LastSeq, ours, "/api/sessions/"+esc(se.ID)+"/turns/"+esc(t.ID))
}

// call is one request with the client the environment names.
func (a *app) call(ctx context.Context, method, path string, body, out any) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	return c.do(ctx, method, path, body, out)
}

func (a *app) printSessions(ctx context.Context, list []json.RawMessage) error {
	asJSON, err := a.json()
	if err != nil {
		return err
	}
	if asJSON {
		if len(list) == 1 {
			return printJSON(a.cfg.Stdout, list[0])
		}
		return printJSON(a.cfg.Stdout, map[string]any{"sessions": list})
	}
	stuck := a.stuckAgents(ctx, list)
	t := newTable(a.cfg.Stdout, "NAME", "ID", "STATE", "AGENT", "SANDBOX", "OWNER", "EVENTS", "CREATED")
	col, now := a.colour(a.cfg.Stdout), time.Now()
	for _, raw := range list {
		var se wire.Session
		json.Unmarshal(raw, &se)
		if stuck[se.ID] || (se.Job != "" && stuck[se.Job]) {
			se.State = "stuck"
		}
		t.row(se.Name, se.ID, paint(col, stateColour(se.State), se.State), se.Agent, se.Sandbox, se.Owner,
			strconv.FormatInt(se.LastSeq, 10), ago(se.CreatedAt.Time(), now))
	}
	return t.flush()
}

// stuckAgents is the ids of the fleet's stuck agents (sessions', jobs') when a session of list
// is running: the fleet decides what is stuck (HANGAR_STUCK_AFTER), so the table says so
// exactly when the fleet does. A token that may not see a fleet (or another person's
// sessions, which an admin lists) shows them running.
func (a *app) stuckAgents(ctx context.Context, list []json.RawMessage) map[string]bool {
	running := false
	for _, raw := range list {
		var se wire.Session
		json.Unmarshal(raw, &se)
		running = running || se.State == "running"
	}
	if !running {
		return nil
	}
	var f wire.FleetSnapshot
	if err := a.call(ctx, "GET", "/api/fleet", nil, &f); err != nil {
		return nil
	}
	stuck := map[string]bool{}
	for _, u := range f.Agents {
		if u.Stuck {
			stuck[u.ID] = true
		}
	}
	return stuck
}
