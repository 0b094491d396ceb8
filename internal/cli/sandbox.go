package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
)

func (a *app) sandboxCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes", "sb"},
		Short:   "make, list, pause, resume and delete sandboxes",
	})
	a.outputFlag(cmd)
	cmd.AddCommand(a.sandboxCreateCmd(), a.sandboxLsCmd(),
		a.sandboxActionCmd("rm NAME", "delete a sandbox (its commands and processes end)", "DELETE", ""),
		a.sandboxActionCmd("pause NAME", "pause a sandbox", "POST", "/pause"),
		a.sandboxActionCmd("resume NAME", "resume a paused sandbox", "POST", "/resume"))
	return cmd
}

func (a *app) sandboxCreateCmd() *cobra.Command {
	var req struct {
		Name     string            `json:"name"`
		Provider string            `json:"provider,omitempty"`
		Image    string            `json:"image,omitempty"`
		Template string            `json:"template,omitempty"`
		Workdir  string            `json:"workdir,omitempty"`
		Env      map[string]string `json:"env,omitempty"`
		Daemon   *bool             `json:"daemon,omitempty"`
	}
	var noDaemon bool
	cmd := &cobra.Command{
		Use:     "create NAME",
		Short:   "make a sandbox and wait until it runs",
		Example: "  hangar sandbox create demo\n  hangar sandbox create build --provider docker --image ubuntu:24.04 --env GREETING=hello",
		Args:    exactArgs(1, "the new sandbox's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			req.Name = args[0]
			if noDaemon {
				f := false
				req.Daemon = &f
			}
			sp := a.spin("making sandbox " + req.Name + "…")
			var sb map[string]any
			err = c.do(cmd.Context(), "POST", "/api/sandboxes", req, &sb)
			sp.stop()
			if err != nil {
				return err
			}
			return a.printSandboxes(sb)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Provider, "provider", "", "local, docker, kubernetes or e2b (default: hangar's HANGAR_DEFAULT_PROVIDER)")
	f.StringVar(&req.Image, "image", "", "docker and kubernetes: the image")
	f.StringVar(&req.Template, "template", "", "e2b: the template")
	f.StringVar(&req.Workdir, "workdir", "", "where commands start (default: the provider's)")
	f.StringToStringVar(&req.Env, "env", nil, "environment for every command in it, KEY=VALUE (repeat, or comma-separate)")
	f.BoolVar(&noDaemon, "no-daemon", false, "run no daemon in it: commands go through the provider's own exec")
	return cmd
}

func (a *app) sandboxLsCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "list your sandboxes (an admin's: everyone's)",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			path := "/api/sandboxes"
			if all {
				path += "?all=true"
			}
			var out map[string]any
			if err := c.do(cmd.Context(), "GET", path, nil, &out); err != nil {
				return err
			}
			return a.printSandboxes(out)
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "with destroyed ones")
	return cmd
}

func (a *app) sandboxActionCmd(use, short, method, suffix string) *cobra.Command {
	verb := strings.Fields(use)[0]
	return &cobra.Command{
		Use:               use,
		Aliases:           map[string][]string{"rm": {"delete", "destroy"}}[verb],
		Short:             short,
		Args:              exactArgs(1, "a sandbox's name"),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var sb map[string]any
			var out any = &sb
			if method == "DELETE" {
				out = nil
			}
			if err := c.do(cmd.Context(), method, "/api/sandboxes/"+esc(args[0])+suffix, nil, out); err != nil {
				return err
			}
			if method == "DELETE" {
				if ok, _ := a.json(); ok {
					return printJSON(a.cfg.Stdout, map[string]string{"name": args[0], "state": "destroyed"})
				}
				fmt.Fprintf(a.cfg.Stdout, "Deleted %s.\n", args[0])
				return nil
			}
			return a.printSandboxes(sb)
		},
	}
}

// printSandboxes prints one sandbox or a {"sandboxes": [...]} list: as it came with -o json,
// else a table.
func (a *app) printSandboxes(v map[string]any) error {
	asJSON, err := a.json()
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.cfg.Stdout, v)
	}
	var list []wire.Sandbox
	if raw, ok := v["sandboxes"]; ok {
		remarshal(raw, &list)
	} else {
		var one wire.Sandbox
		remarshal(v, &one)
		list = append(list, one)
	}
	col := a.colour(a.cfg.Stdout)
	t := newTable(a.cfg.Stdout, "NAME", "STATE", "PROVIDER", "OWNER", "CREATED", "WORKDIR")
	now := time.Now()
	for _, sb := range list {
		state := paint(col, stateColour(sb.State), sb.State)
		if sb.Reason != "" {
			state += " (" + oneLine(sb.Reason, 60) + ")"
		}
		t.row(sb.Name, state, sb.Provider, sb.Owner, ago(time.Time(sb.CreatedAt), now), sb.Workdir)
	}
	return t.flush()
}
