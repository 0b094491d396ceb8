package turns

import "slices"

// PromptArg is the argument of an agent's command line that the prompt replaces.
const PromptArg = "{prompt}"

// Agent is a command template: how to run one turn of an agent CLI with a prompt.
type Agent struct {
	Name string
	// Argv is the command line; each argument equal to PromptArg becomes the prompt (one
	// argument, never split or interpreted by a shell).
	Argv []string
}

// DefaultAgents are the agents hangar knows without configuration: Claude Code and Codex as
// their JSON-lines modes print, and command, whose prompt is run as a bash command that prints
// JSON lines (tests and demos replay recorded logs with it).
func DefaultAgents() map[string]Agent {
	return map[string]Agent{
		"claude-code": {Name: "claude-code", Argv: []string{"claude", "-p", PromptArg, "--output-format", "stream-json", "--verbose"}},
		"codex":       {Name: "codex", Argv: []string{"codex", "exec", "--json", PromptArg}},
		"command":     {Name: "command", Argv: []string{"bash", "-c", PromptArg}},
	}
}

// agentNames lists agents' names, sorted, for an error that says which exist.
func agentNames(agents map[string]Agent) []string {
	var names []string
	for n := range agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
