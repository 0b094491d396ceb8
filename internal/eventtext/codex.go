package eventtext

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/internal/wire"
)

// codexItem is an item of Codex's: a command as it starts and its outcome as it ends, the
// agent's messages, its reasoning folded, file changes, MCP tool calls, web searches, errors.
func codexItem(typ string, data json.RawMessage) []wire.Line {
	var m struct {
		Item struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Message  string `json:"message"`
			Command  string `json:"command"`
			Output   string `json:"aggregated_output"`
			ExitCode *int   `json:"exit_code"`
			Status   string `json:"status"`
			Server   string `json:"server"`
			Tool     string `json:"tool"`
			Query    string `json:"query"`
			Changes  []struct {
				Path string `json:"path"`
				Kind string `json:"kind"`
			} `json:"changes"`
		} `json:"item"`
	}
	json.Unmarshal(data, &m)
	it := m.Item
	done := typ == "item.completed"
	failed := it.Status == "failed"
	switch it.Type {
	case "command_execution":
		if !done {
			return []wire.Line{line(KindToolCall, "$ "+it.Command, commandWidth)}
		}
		return []wire.Line{commandOutcome(it.ExitCode, it.Output, failed)}
	case "agent_message":
		if done && strings.TrimSpace(it.Text) != "" {
			return []wire.Line{line(KindMessage, it.Text, textWidth)}
		}
	case "reasoning":
		if done {
			return []wire.Line{{Kind: KindThinking, Text: "(thinking)"}}
		}
	case "error":
		return []wire.Line{line(KindError, "error: "+unwrap(it.Message), textWidth)}
	case "file_change":
		if done {
			var files []string
			for _, c := range it.Changes {
				files = append(files, c.Kind+" "+c.Path)
			}
			if failed {
				return []wire.Line{line(KindError, "files not changed: "+strings.Join(files, ", "), pathWidth)}
			}
			return []wire.Line{line(KindToolCall, "files: "+strings.Join(files, ", "), pathWidth)}
		}
	case "mcp_tool_call":
		if !done {
			return []wire.Line{line(KindToolCall, it.Server+"."+it.Tool, pathWidth)}
		}
		if failed {
			return []wire.Line{{Kind: KindError, Text: "  ✗ failed"}}
		}
	case "web_search":
		if !done {
			return []wire.Line{line(KindToolCall, "search: "+it.Query, pathWidth)}
		}
	default:
		if done {
			return []wire.Line{{Kind: KindOther, Text: strings.ReplaceAll(it.Type, "_", " ")}}
		}
	}
	return nil
}

// commandOutcome is how a command ended: its exit code and output, an error when it failed.
func commandOutcome(code *int, output string, failed bool) wire.Line {
	s := ""
	if code != nil {
		s = fmt.Sprintf("exit %d ", *code)
	}
	return outcome(failed || (code != nil && *code != 0), s+output)
}

// outcome is a tool's outcome, after an arrow: an error when it failed.
func outcome(failed bool, s string) wire.Line {
	if failed {
		return wire.Line{Kind: KindError, Text: "  → " + OneLine(s, outputWidth)}
	}
	return wire.Line{Kind: KindToolOutput, Text: "  → " + OneLine(s, outputWidth)}
}

// codexUsage is Codex's turn.completed: the tokens the turn used.
func codexUsage(data json.RawMessage) []wire.Line {
	var u struct {
		Usage struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(data, &u)
	return []wire.Line{{Kind: KindUsage, Text: fmt.Sprintf("tokens: %d in, %d out", u.Usage.In, u.Usage.Out)}}
}
