// Package eventtext says what a session's or job's event says, for a person: a line per thing
// (what the agent said, a tool it called, a shell command as "$ command", the tool's output
// after "→", the turn's result and cost, an API retry, an error, hangar's turn.started and
// turn.finished). It reads Claude Code's stream-json and Codex's exec --json; thinking is one
// folded line, "(thinking)", never its text or signature; any other line is its type and,
// when it has one, its message. Lines never hold raw JSON: that is the event's data.
//
// It is the one formatter of events: the CLI prints its lines, and the REST API and MCP serve
// them with each event (wire.Event's lines), so the terminal and the Fleet page read the same.
// It imports only wire, so the CLI, which reaches hangar over HTTP only, may use it.
package eventtext

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/wire"
)

// Kinds of line. Every line that says something failed is KindError, whatever it is of (a
// tool's error, a command that exited non-zero, a failed result or turn, an agent's error).
const (
	KindTurn       = "turn"        // hangar's turn.started and turn.finished (when not failed)
	KindStart      = "start"       // a run of the agent began: its model and folder
	KindMessage    = "message"     // what the agent said
	KindThinking   = "thinking"    // the agent thought: "(thinking)", folded
	KindToolCall   = "tool_call"   // a tool the agent called: "$ command", or the tool and its target
	KindToolOutput = "tool_output" // what a tool gave back: "→ …"
	KindResult     = "result"      // the turn's result, with its cost
	KindUsage      = "usage"       // tokens used
	KindRetry      = "retry"       // an API call failed and will be retried, or a rate limit
	KindError      = "error"       // something failed
	KindOther      = "other"       // a line of another kind, or one that is not JSON
)

// Widths lines are cut to, in characters: a message or a result says more than a command or a
// tool's output, which a person opens the raw event for.
const (
	textWidth    = 300
	commandWidth = 200
	outputWidth  = 200
	pathWidth    = 160
)

// Lines is what ev says, a line per thing; none for what says nothing to a person (Codex's
// thread.started, Claude Code's hooks and token counts).
func Lines(ev wire.Event) []wire.Line {
	if ev.Invalid || ev.Truncated {
		return notJSON(ev)
	}
	switch ev.Type {
	case "turn.started":
		return started(ev)
	case "turn.finished":
		return []wire.Line{finished(ev.Data)}
	case "assistant", "user":
		return claudeMessage(ev.Data)
	case "result":
		return claudeResult(ev.Data)
	case "system":
		return claudeSystem(ev.Data)
	case "rate_limit_event":
		return rateLimit(ev.Data)
	case "item.started", "item.completed":
		return codexItem(ev.Type, ev.Data)
	case "turn.completed":
		return codexUsage(ev.Data)
	case "error", "turn.failed":
		return []wire.Line{errorLine(ev.Data)}
	case "thread.started", "stream_event":
		// Codex's thread id; Claude Code's partial messages (--include-partial-messages), which
		// its whole message says again.
		return nil
	}
	return other(ev)
}

// line is a line of kind: s on one line, cut to width characters.
func line(kind, s string, width int) wire.Line {
	return wire.Line{Kind: kind, Text: OneLine(s, width)}
}

// OneLine is s on one line (runs of white space made one space), cut to n characters with an
// ellipsis.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// notJSON is a line that was not JSON (its text, or its size when it is not UTF-8), or one cut
// at the longest line hangar records (its type and that it was cut).
func notJSON(ev wire.Event) []wire.Line {
	if ev.Truncated {
		what := "line"
		if ev.Type != "" && ev.Type != "invalid" {
			what = ev.Type + " line"
		}
		return []wire.Line{{Kind: KindOther, Text: "(" + what + " cut: too long to keep whole)"}}
	}
	var s string
	if json.Unmarshal(ev.Data, &s) == nil {
		if s = OneLine(s, textWidth); s == "" {
			return nil
		}
		return []wire.Line{{Kind: KindOther, Text: s}}
	}
	var b struct {
		Base64 string `json:"base64"`
	}
	json.Unmarshal(ev.Data, &b)
	raw, _ := base64.StdEncoding.DecodeString(b.Base64)
	return []wire.Line{{Kind: KindOther, Text: fmt.Sprintf("(a line of %d bytes that are not text)", len(raw))}}
}

// other is a line of a type this package does not know: its type, and its message or text
// when it has one.
func other(ev wire.Event) []wire.Line {
	var m struct {
		Message any    `json:"message"`
		Text    string `json:"text"`
	}
	json.Unmarshal(ev.Data, &m)
	s := ev.Type
	if msg, ok := m.Message.(string); ok && msg != "" {
		s += ": " + msg
	} else if m.Text != "" {
		s += ": " + m.Text
	}
	return []wire.Line{line(KindOther, s, textWidth)}
}

// started is hangar's turn.started, with its agent. Codex prints a turn.started of its own,
// without one: hangar's says it.
func started(ev wire.Event) []wire.Line {
	var s wire.TurnStarted
	if json.Unmarshal(ev.Data, &s) != nil || s.Agent == "" {
		return nil
	}
	return []wire.Line{{Kind: KindTurn, Text: fmt.Sprintf("── %s started (%s)", ev.Turn, s.Agent)}}
}

// finished is hangar's turn.finished: the turn's status, how its agent ended, the cost its
// summary gives, and why, less what the line says already.
func finished(data json.RawMessage) wire.Line {
	var f wire.TurnFinished
	json.Unmarshal(data, &f)
	var sum struct {
		CostUSD *float64 `json:"cost_usd"` // the harness's summary: what the agent said it cost
	}
	json.Unmarshal(f.Summary, &sum)
	s := "── turn " + f.Status
	if f.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *f.ExitCode)
	}
	if f.Signal != "" {
		s += ", signal " + f.Signal
	}
	if sum.CostUSD != nil {
		s += fmt.Sprintf(", cost $%.4f", *sum.CostUSD)
	}
	if f.Reason != "" {
		// A failed turn's reason starts with how the agent ended, said here already.
		reason := f.Reason
		if f.ExitCode != nil {
			reason = strings.TrimPrefix(reason, fmt.Sprintf("exit code %d: ", *f.ExitCode))
		}
		if f.Signal != "" {
			reason = strings.TrimPrefix(reason, "killed by "+f.Signal+": ")
		}
		s += ": " + OneLine(reason, textWidth)
	}
	if f.Status == "failed" {
		return wire.Line{Kind: KindError, Text: s}
	}
	return wire.Line{Kind: KindTurn, Text: s}
}

// errorLine is an error the agent reported: Codex's error ({message}) and turn.failed
// ({error: {message}}).
func errorLine(data json.RawMessage) wire.Line {
	var e struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(data, &e)
	msg := e.Message
	if msg == "" {
		msg = e.Error.Message
	}
	return line(KindError, "error: "+unwrap(msg), textWidth)
}

// unwrap is an error message that is an API's JSON error (Codex passes them on as they came:
// {"type":"error","status":400,"error":{"message":...}}) said as its message and status; any
// other message as it is.
func unwrap(msg string) string {
	var e struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if !strings.HasPrefix(strings.TrimSpace(msg), "{") || json.Unmarshal([]byte(msg), &e) != nil {
		return msg
	}
	s := e.Error.Message
	if s == "" {
		s = e.Message
	}
	if s == "" {
		return msg
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	return s
}
