package eventtext

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
)

// claudeBlock is a block of a Claude Code message's content.
type claudeBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"is_error"`
}

// claudeMessage is an assistant or user line: a line per block (text, thinking folded, a tool
// call, a tool's result), and the API error an assistant line may carry.
func claudeMessage(data json.RawMessage) []wire.Line {
	var m struct {
		Message struct {
			Content []claudeBlock `json:"content"`
		} `json:"message"`
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil {
		// Its content may be a plain string (read again only then: blocks are the rule).
		var p struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		json.Unmarshal(data, &p)
		if strings.TrimSpace(p.Message.Content) != "" {
			m.Message.Content = []claudeBlock{{Type: "text", Text: p.Message.Content}}
		}
	}
	var out []wire.Line
	for _, b := range m.Message.Content {
		if l, ok := claudeBlockLine(b); ok {
			out = append(out, l)
		}
	}
	if m.Error != "" {
		out = append(out, line(KindError, "error: "+m.Error, textWidth))
	}
	return out
}

func claudeBlockLine(b claudeBlock) (wire.Line, bool) {
	switch b.Type {
	case "text":
		return line(KindMessage, b.Text, textWidth), strings.TrimSpace(b.Text) != ""
	case "thinking", "redacted_thinking":
		return wire.Line{Kind: KindThinking, Text: "(thinking)"}, true
	case "tool_use":
		return toolCall(b.Name, b.Input), true
	case "tool_result":
		if b.IsError {
			return wire.Line{Kind: KindError, Text: "  ✗ " + OneLine(toolResultText(b.Content), outputWidth)}, true
		}
		return wire.Line{Kind: KindToolOutput, Text: "  → " + OneLine(toolResultText(b.Content), outputWidth)}, true
	case "image":
		return wire.Line{Kind: KindMessage, Text: "(an image)"}, true
	}
	return wire.Line{}, false
}

// toolTargets are the inputs that say what a tool call is about, in the order looked for:
// Read's file_path, Grep's pattern, WebFetch's url, Task's description, ...
var toolTargets = []string{"file_path", "notebook_path", "pattern", "path", "url", "query", "description", "prompt", "skill"}

// toolCall is a tool call: a shell command as "$ command", any other tool as its name and
// what it is about (Read /src/main.go, Grep except_handler).
func toolCall(name string, input json.RawMessage) wire.Line {
	var in map[string]any
	json.Unmarshal(input, &in)
	if cmd, ok := in["command"].(string); ok && cmd != "" {
		return line(KindToolCall, "$ "+cmd, commandWidth)
	}
	for _, k := range toolTargets {
		if v, ok := in[k].(string); ok && v != "" {
			return line(KindToolCall, name+" "+v, pathWidth)
		}
	}
	return line(KindToolCall, name, pathWidth)
}

// toolResultText is a tool result's content: a string, or text blocks (an image is said so).
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "(no output)"
		}
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "image" {
			parts = append(parts, "(an image)")
		} else if strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	if len(parts) == 0 {
		return "(no output)"
	}
	return strings.Join(parts, " ")
}

// claudeResult is the result of a run: its text and cost, an error when it failed.
func claudeResult(data json.RawMessage) []wire.Line {
	var r struct {
		Result  string   `json:"result"`
		IsError bool     `json:"is_error"`
		Subtype string   `json:"subtype"`
		Cost    *float64 `json:"total_cost_usd"`
	}
	json.Unmarshal(data, &r)
	s := "result: " + OneLine(r.Result, textWidth)
	if r.Result == "" && r.Subtype != "" && r.Subtype != "success" {
		s = "result: " + strings.ReplaceAll(r.Subtype, "_", " ")
	}
	if r.Cost != nil {
		s += fmt.Sprintf(" (cost $%.4f)", *r.Cost)
	}
	if r.IsError || (r.Subtype != "" && r.Subtype != "success") {
		return []wire.Line{{Kind: KindError, Text: s}}
	}
	return []wire.Line{{Kind: KindResult, Text: s}}
}

// claudeSystem is what a person needs of Claude Code's system lines, a line each: the start of
// a run (its model and folder), each retry of a call to the API (the attempt, the error, the
// wait before the next), so an agent that is retrying does not read as stuck, and its
// background tasks. Hooks, token counts and the like say nothing.
func claudeSystem(data json.RawMessage) []wire.Line {
	var m struct {
		Subtype     string   `json:"subtype"`
		Model       string   `json:"model"`
		Cwd         string   `json:"cwd"`
		Attempt     int      `json:"attempt"`
		MaxRetries  int      `json:"max_retries"`
		DelayMS     *float64 `json:"retry_delay_ms"`
		ErrorStatus *int     `json:"error_status"`
		Error       string   `json:"error"`
		Description string   `json:"description"`
		Summary     string   `json:"summary"`
		Status      string   `json:"status"`
	}
	json.Unmarshal(data, &m)
	switch m.Subtype {
	case "init":
		s := "run started"
		if m.Model != "" {
			s += ": model " + OneLine(m.Model, 80)
		}
		if m.Cwd != "" {
			s += ", in " + OneLine(m.Cwd, pathWidth)
		}
		return []wire.Line{{Kind: KindStart, Text: s}}
	case "api_retry":
		s := fmt.Sprintf("API call failed, retry %d", m.Attempt)
		if m.MaxRetries > 0 {
			s += fmt.Sprintf(" of %d", m.MaxRetries)
		}
		if m.Error != "" || m.ErrorStatus != nil {
			s += ":"
		}
		if m.Error != "" {
			s += " " + OneLine(m.Error, pathWidth)
		}
		if m.ErrorStatus != nil {
			s += fmt.Sprintf(" (HTTP %d)", *m.ErrorStatus)
		}
		if m.DelayMS != nil {
			s += fmt.Sprintf(", in %s", (time.Duration(*m.DelayMS) * time.Millisecond).Round(100*time.Millisecond))
		}
		return []wire.Line{{Kind: KindRetry, Text: s}}
	case "task_started":
		return []wire.Line{line(KindToolCall, "background task started: "+m.Description, textWidth)}
	case "task_notification":
		if m.Status == "failed" {
			return []wire.Line{line(KindError, m.Summary, textWidth)}
		}
		return []wire.Line{line(KindToolOutput, m.Summary, textWidth)}
	}
	return nil
}

// rateLimit is Claude Code's rate_limit_event: nothing while calls are allowed, else that they
// are limited and until when.
func rateLimit(data json.RawMessage) []wire.Line {
	var m struct {
		Info struct {
			Status   string `json:"status"`
			ResetsAt int64  `json:"resetsAt"`
		} `json:"rate_limit_info"`
	}
	json.Unmarshal(data, &m)
	if m.Info.Status == "" || m.Info.Status == "allowed" {
		return nil
	}
	s := "rate limit: " + m.Info.Status
	if m.Info.ResetsAt > 0 {
		s += ", until " + time.Unix(m.Info.ResetsAt, 0).UTC().Format("2006-01-02 15:04 UTC")
	}
	return []wire.Line{line(KindRetry, s, textWidth)}
}
