package cli

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/wire"
)

// remarshal copies v (decoded JSON) into out's type.
func remarshal(v, out any) {
	b, _ := json.Marshal(v)
	json.Unmarshal(b, out)
}

// completeSandboxes completes a sandbox name, the first argument, from hangar's list (nothing,
// quietly, when hangar cannot be reached).
func (a *app) completeSandboxes(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out struct {
		Sandboxes []wire.Sandbox `json:"sandboxes"`
	}
	if c.do(cmd.Context(), "GET", "/api/sandboxes", nil, &out) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(out.Sandboxes))
	for _, sb := range out.Sandboxes {
		names = append(names, sb.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeProcess completes a sandbox's name, then one of its processes' ids (with its
// command as the description).
func (a *app) completeProcess(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return a.completeSandboxes(cmd, args, prefix)
	}
	c, err := a.client()
	if len(args) > 1 || err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out struct {
		Processes []wire.Process `json:"processes"`
	}
	if c.do(cmd.Context(), "GET", procPath(args[0], ""), nil, &out) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ids := make([]string, 0, len(out.Processes))
	for _, p := range out.Processes {
		ids = append(ids, p.ID+"\t"+oneLine(p.Command, 50))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// completeSessionTurn completes a session's name, then the id of a turn it is running (with
// its prompt as the description).
func (a *app) completeSessionTurn(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if len(args) > 1 || err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if len(args) == 0 {
		var out struct {
			Sessions []wire.Session `json:"sessions"`
		}
		c.do(cmd.Context(), "GET", "/api/sessions", nil, &out)
		var names []string
		for _, se := range out.Sessions {
			names = append(names, se.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	var out struct {
		Turns []wire.Turn `json:"turns"`
	}
	c.do(cmd.Context(), "GET", "/api/sessions/"+esc(args[0])+"/turns", nil, &out)
	var ids []string
	for _, t := range out.Turns {
		if !turnEnded(t.State) {
			ids = append(ids, t.ID+"\t"+oneLine(t.Prompt, 50))
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// completeRunningJobs completes the id of a job that has not ended (with its prompt as the
// description).
func (a *app) completeRunningJobs(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if len(args) > 0 || err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out struct {
		Jobs []wire.Job `json:"jobs"`
	}
	c.do(cmd.Context(), "GET", "/api/jobs", nil, &out)
	var ids []string
	for _, j := range out.Jobs {
		if !turnEnded(j.State) && j.Turn != nil {
			ids = append(ids, j.ID+"\t"+oneLine(j.Turn.Prompt, 50))
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
