package runlog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxLineBytes is the longest run-log line recorded whole. A longer line is cut to this many
// bytes and flagged truncated, so one huge tool result cannot blow up an event row or a reader.
const MaxLineBytes = 1 << 20

// Kinds of what a run-log line says, for summaries. A line keeps its own type and data
// whatever its kinds; a line with none of these is still recorded.
const (
	KindText       = "assistant_text" // the agent said something
	KindToolCall   = "tool_call"      // the agent called a tool (Command set for a shell command)
	KindToolResult = "tool_result"    // a tool call's outcome (IsError when it failed)
	KindCost       = "cost"           // the run's cost so far (CostUSD) or its token usage
	KindResult     = "result"         // a final result of a turn of the agent (IsError when it failed)
	KindError      = "error"          // an error the agent reported
	KindStart      = "start"          // a run of the agent began (Text says its model and folder)
	KindRetry      = "retry"          // a call to the model's API failed and will be retried (Text says which, why, when)
)

// Line is one run-log line made ready to record: its type, its data as a JSON value, its
// flags, and what it says.
type Line struct {
	Type      string          // the line's own "type"; "invalid" for a line that is not JSON
	Data      json.RawMessage // the line as written; for an invalid or cut line a JSON string of it, or {"base64": ...} when it is not UTF-8
	Invalid   bool
	Truncated bool
	Items     []Item
}

// Item is one thing a line says.
type Item struct {
	Kind    string
	Text    string   // assistant text, a result's text, an error's message
	Tool    string   // the tool's name (Bash, Edit, command_execution, file_change, ...)
	Command string   // the shell command of a tool call, when it has one
	IsError bool     // a failed tool result or result
	CostUSD *float64 // total_cost_usd of a Claude Code result (cumulative for the process)
	// Tokens of a Codex turn.completed's usage.
	InputTokens, OutputTokens int64
}

// TypeInvalid is the type of an event whose line is not JSON.
const TypeInvalid = "invalid"

// TypeTurnFinished is the type of the event hangar adds when a turn ends (turns'
// TypeTurnFinished): an agent's line cannot take it.
const TypeTurnFinished = "turn.finished"

// Classify turns one run-log line (without its newline) into a Line. It never fails: a line
// that is not a JSON object is kept, flagged invalid.
func Classify(raw []byte) Line {
	if len(raw) > MaxLineBytes {
		cut := raw[:MaxLineBytes]
		// Do not cut inside a UTF-8 sequence.
		for i := 0; i < utf8.UTFMax && len(cut) > 0 && !utf8.Valid(cut); i++ {
			cut = cut[:len(cut)-1]
		}
		return Line{Type: eventType(leadingType(cut)), Data: quote(cut), Truncated: true}
	}
	var head struct {
		Type string `json:"type"`
	}
	if !utf8.Valid(raw) || !json.Valid(raw) || json.Unmarshal(raw, &head) != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return Line{Type: TypeInvalid, Data: quote(raw), Invalid: true}
	}
	l := Line{Type: eventType(head.Type), Data: json.RawMessage(bytes.Clone(raw))}
	l.Items = classifyClaude(head.Type, raw)
	if l.Items == nil {
		l.Items = classifyCodex(head.Type, raw)
	}
	return l
}

// eventType is the event type of a line whose own type is t. The agent's words cannot pose as
// hangar's: turn.finished (which carries a turn's status) and invalid are hangar's alone, so a
// line of either type gets "agent:" before it. turn.started is not: Codex prints its own, and
// hangar's says which agent it started. A NUL character, which no store keeps, is dropped.
func eventType(t string) string {
	t = strings.ReplaceAll(t, "\x00", "")
	if t == TypeTurnFinished || t == TypeInvalid {
		return "agent:" + t
	}
	return t
}

// quote makes a JSON value of bytes that are not a JSON line: a string when they are UTF-8,
// else {"base64": ...}, so nothing is mangled silently.
func quote(b []byte) json.RawMessage {
	if utf8.Valid(b) {
		out, _ := json.Marshal(string(b))
		return out
	}
	out, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
	return out
}

// leadingTypeRE is compiled on first use: a cut line is rare, and compiling it at init cost
// every start of hangar-envd (a few per turn) about 2 ms.
var leadingTypeRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\{\s*"type"\s*:\s*"([A-Za-z0-9_./-]{1,64})"`)
})

// leadingType finds the type of a cut line when "type" is its first key (as both agents write
// it); else "".
func leadingType(b []byte) string {
	if m := leadingTypeRE().FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// classifyClaude reads Claude Code's stream-json (claude -p --output-format stream-json
// --verbose). Nil when the line is not one of its kinds.
func classifyClaude(typ string, raw []byte) []Item {
	switch typ {
	case "assistant", "user":
		var m struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			IsError bool            `json:"is_error"`
		}
		json.Unmarshal(m.Message.Content, &blocks) // content may be a plain string: no blocks
		var items []Item
		for _, b := range blocks {
			switch b.Type {
			case "text":
				items = append(items, Item{Kind: KindText, Text: b.Text})
			case "tool_use":
				var in struct {
					Command string `json:"command"`
				}
				json.Unmarshal(b.Input, &in)
				items = append(items, Item{Kind: KindToolCall, Tool: b.Name, Command: in.Command})
			case "tool_result":
				items = append(items, Item{Kind: KindToolResult, IsError: b.IsError})
			}
		}
		if m.Error != "" {
			items = append(items, Item{Kind: KindError, Text: m.Error})
		}
		return items
	case "result":
		var r struct {
			Subtype      string   `json:"subtype"`
			IsError      bool     `json:"is_error"`
			Result       string   `json:"result"`
			TotalCostUSD *float64 `json:"total_cost_usd"`
			Errors       []string `json:"errors"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		items := []Item{{Kind: KindResult, Text: r.Result, IsError: r.IsError || r.Subtype != "success"}}
		if r.TotalCostUSD != nil {
			items = append(items, Item{Kind: KindCost, CostUSD: r.TotalCostUSD})
		}
		for _, e := range r.Errors {
			items = append(items, Item{Kind: KindError, Text: e})
		}
		return items
	case "system":
		return classifyClaudeSystem(raw)
	}
	return nil
}

// classifyClaudeSystem reads the system lines a person needs: the start of a run (init) and
// each retry of an API call (api_retry: a run that retries for minutes prints nothing else).
// Hooks, task notices and the rest say nothing.
func classifyClaudeSystem(raw []byte) []Item {
	var m struct {
		Subtype     string   `json:"subtype"`
		Model       string   `json:"model"`
		Cwd         string   `json:"cwd"`
		Attempt     int      `json:"attempt"`
		MaxRetries  int      `json:"max_retries"`
		DelayMS     *float64 `json:"retry_delay_ms"`
		ErrorStatus *int     `json:"error_status"`
		Error       string   `json:"error"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	switch m.Subtype {
	case "init":
		s := "run started"
		if m.Model != "" {
			s += ": model " + m.Model
		}
		if m.Cwd != "" {
			s += ", in " + m.Cwd
		}
		return []Item{{Kind: KindStart, Text: s}}
	case "api_retry":
		s := fmt.Sprintf("API call failed, retry %d", m.Attempt)
		if m.MaxRetries > 0 {
			s += fmt.Sprintf(" of %d", m.MaxRetries)
		}
		if m.Error != "" || m.ErrorStatus != nil {
			s += ":"
		}
		if m.Error != "" {
			s += " " + m.Error
		}
		if m.ErrorStatus != nil {
			s += fmt.Sprintf(" (HTTP %d)", *m.ErrorStatus)
		}
		if m.DelayMS != nil {
			s += fmt.Sprintf(", in %s", (time.Duration(*m.DelayMS) * time.Millisecond).Round(100*time.Millisecond))
		}
		return []Item{{Kind: KindRetry, Text: s}}
	}
	return nil
}

// classifyCodex reads Codex's codex exec --json. Nil when the line is not one of its kinds.
func classifyCodex(typ string, raw []byte) []Item {
	switch typ {
	case "item.started", "item.completed":
		var m struct {
			Item struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				Message  string `json:"message"`
				Command  string `json:"command"`
				Status   string `json:"status"`
				ExitCode *int   `json:"exit_code"`
			} `json:"item"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		it := m.Item
		switch {
		case it.Type == "agent_message" && typ == "item.completed":
			return []Item{{Kind: KindText, Text: it.Text}}
		case it.Type == "error":
			return []Item{{Kind: KindError, Text: it.Message}}
		case isCodexTool(it.Type) && typ == "item.started":
			return []Item{{Kind: KindToolCall, Tool: it.Type, Command: it.Command}}
		case isCodexTool(it.Type):
			failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
			return []Item{{Kind: KindToolResult, Tool: it.Type, IsError: failed}}
		}
	case "error":
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &m) == nil {
			return []Item{{Kind: KindError, Text: m.Message}}
		}
	case "turn.completed":
		var m struct {
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(raw, &m)
		return []Item{{Kind: KindResult}, {Kind: KindCost, InputTokens: m.Usage.InputTokens, OutputTokens: m.Usage.OutputTokens}}
	case "turn.failed":
		var m struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(raw, &m)
		return []Item{{Kind: KindResult, Text: m.Error.Message, IsError: true}}
	}
	return nil
}

func isCodexTool(t string) bool {
	switch t {
	case "command_execution", "file_change", "mcp_tool_call", "web_search":
		return true
	}
	return false
}
