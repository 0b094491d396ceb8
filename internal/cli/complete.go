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

// completeSandboxFlag completes a flag's value with a sandbox name, whatever the arguments.
func (a *app) completeSandboxFlag(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	return a.completeSandboxes(cmd, nil, prefix)
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

// completeSessions completes a session's name, the first argument (with its agent and
// sandbox as the description).
func (a *app) completeSessions(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if len(args) > 0 || err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out struct {
		Sessions []wire.Session `json:"sessions"`
	}
	c.do(cmd.Context(), "GET", "/api/sessions", nil, &out)
	var names []string
	for _, se := range out.Sessions {
		names = append(names, se.Name+"\t"+se.Agent+" in "+se.Sandbox)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeSessionTurn completes a session's name, then the id of a turn it is running (with
// its prompt as the description).
func (a *app) completeSessionTurn(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if len(args) != 1 || err != nil {
		return a.completeSessions(cmd, args, prefix)
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

// completeJobs completes the id of a job, the first argument (with its prompt as the
// description); running only those that have not ended.
func (a *app) completeJobs(running bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
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
			if running && (turnEnded(j.State) || j.Turn == nil) {
				continue
			}
			prompt := ""
			if j.Turn != nil {
				prompt = oneLine(j.Turn.Prompt, 50)
			}
			ids = append(ids, j.ID+"\t"+prompt)
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}
