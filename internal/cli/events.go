package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
)

// eventPrinter writes agent events for a person: what the agent said, the tools it called
// (a shell command as "$ command"), their results, the turn's result and cost, and hangar's
// turn.started and turn.finished. Claude Code's stream-json and Codex's exec --json are read;
// any other line is shown as its type and data, on one line.
type eventPrinter struct {
	w      io.Writer
	colour bool
}

func (p *eventPrinter) print(ev wire.Event) {
	at := ""
	if t := time.Time(ev.TS); !t.IsZero() {
		at = t.Local().Format("15:04:05")
	}
	for _, l := range p.lines(ev) {
		fmt.Fprintf(p.w, "%s  %s\n", paint(p.colour, "90", at), l)
	}
}

// lines is what one event says, a line per thing.
func (p *eventPrinter) lines(ev wire.Event) []string {
	var d map[string]json.RawMessage
	if ev.Invalid || json.Unmarshal(ev.Data, &d) != nil {
		return []string{"? " + oneLine(string(ev.Data), 200)}
	}
	str := func(v json.RawMessage) string {
		var s string
		json.Unmarshal(v, &s)
		return s
	}
	switch ev.Type {
	case "turn.started":
		if agent := str(d["agent"]); agent != "" {
			return []string{paint(p.colour, "1", fmt.Sprintf("── %s started (%s)", ev.Turn, agent))}
		}
		return nil // Codex's own turn.started: hangar's says it
	case "turn.finished":
		return []string{p.finished(d)}
	case "assistant", "user":
		return p.claudeMessage(d)
	case "result":
		return p.claudeResult(d)
	case "item.started", "item.completed":
		return p.codexItem(ev.Type, d)
	case "turn.completed":
		var u struct {
			Usage struct {
				In  int64 `json:"input_tokens"`
				Out int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(ev.Data, &u)
		return []string{fmt.Sprintf("tokens: %d in, %d out", u.Usage.In, u.Usage.Out)}
	case "error", "turn.failed":
		msg := str(d["message"])
		if msg == "" {
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			json.Unmarshal(ev.Data, &e)
			msg = e.Error.Message
		}
		return []string{paint(p.colour, "31", "error: "+oneLine(msg, 300))}
	case "system":
		return p.system(d)
	case "thread.started":
		return nil
	}
	return []string{ev.Type + " " + oneLine(string(ev.Data), 200)}
}

// system is what a person needs of Claude Code's system lines, a line each: the start of a run
// (its model and folder) and each retry of a call to the API (the attempt, the error, the wait
// before the next), so an agent that is retrying does not read as stuck. Hooks, task
// notices and the like say nothing here.
func (p *eventPrinter) system(d map[string]json.RawMessage) []string {
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
	b, _ := json.Marshal(d)
	json.Unmarshal(b, &m)
	switch m.Subtype {
	case "init":
		s := "run started"
		if m.Model != "" {
			s += ": model " + oneLine(m.Model, 80)
		}
		if m.Cwd != "" {
			s += ", in " + oneLine(m.Cwd, 160)
		}
		return []string{paint(p.colour, "90", s)}
	case "api_retry":
		s := fmt.Sprintf("API call failed, retry %d", m.Attempt)
		if m.MaxRetries > 0 {
			s += fmt.Sprintf(" of %d", m.MaxRetries)
		}
		if m.Error != "" || m.ErrorStatus != nil {
			s += ":"
		}
		if m.Error != "" {
			s += " " + oneLine(m.Error, 160)
		}
		if m.ErrorStatus != nil {
			s += fmt.Sprintf(" (HTTP %d)", *m.ErrorStatus)
		}
		if m.DelayMS != nil {
			s += fmt.Sprintf(", in %s", (time.Duration(*m.DelayMS) * time.Millisecond).Round(100*time.Millisecond))
		}
		return []string{paint(p.colour, "33", s)}
	}
	return nil
}

func (p *eventPrinter) finished(d map[string]json.RawMessage) string {
	var f wire.TurnFinished
	b, _ := json.Marshal(d)
	json.Unmarshal(b, &f)
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
		s += ": " + oneLine(reason, 300)
	}
	return paint(p.colour, stateColour(f.Status), s)
}

func (p *eventPrinter) claudeMessage(d map[string]json.RawMessage) []string {
	var m struct {
		Content []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
			IsError bool            `json:"is_error"`
		} `json:"content"`
	}
	json.Unmarshal(d["message"], &m)
	var out []string
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			out = append(out, oneLine(b.Text, 300))
		case "tool_use":
			var in struct {
				Command string `json:"command"`
			}
			json.Unmarshal(b.Input, &in)
			if in.Command != "" {
				out = append(out, paint(p.colour, "36", "$ "+oneLine(in.Command, 200)))
			} else {
				out = append(out, paint(p.colour, "36", b.Name+" "+oneLine(string(b.Input), 160)))
			}
		case "tool_result":
			text := toolResultText(b.Content)
			if b.IsError {
				out = append(out, paint(p.colour, "31", "  ✗ "+oneLine(text, 200)))
			} else {
				out = append(out, paint(p.colour, "90", "  → "+oneLine(text, 200)))
			}
		}
	}
	return out
}

// toolResultText is a tool result's content: a string, or text blocks.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, " ")
}

func (p *eventPrinter) claudeResult(d map[string]json.RawMessage) []string {
	var r struct {
		Result  string   `json:"result"`
		IsError bool     `json:"is_error"`
		Subtype string   `json:"subtype"`
		Cost    *float64 `json:"total_cost_usd"`
	}
	b, _ := json.Marshal(d)
	json.Unmarshal(b, &r)
	s := "result: " + oneLine(r.Result, 300)
	if r.Cost != nil {
		s += fmt.Sprintf(" (cost $%.4f)", *r.Cost)
	}
	if r.IsError || (r.Subtype != "" && r.Subtype != "success") {
		return []string{paint(p.colour, "31", s)}
	}
	return []string{paint(p.colour, "32", s)}
}

func (p *eventPrinter) codexItem(typ string, d map[string]json.RawMessage) []string {
	var it struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Message  string `json:"message"`
		Command  string `json:"command"`
		Output   string `json:"aggregated_output"`
		ExitCode *int   `json:"exit_code"`
	}
	json.Unmarshal(d["item"], &it)
	switch {
	case it.Type == "command_execution" && typ == "item.started":
		return []string{paint(p.colour, "36", "$ "+oneLine(it.Command, 200))}
	case it.Type == "command_execution":
		s := "  → "
		if it.ExitCode != nil {
			s += fmt.Sprintf("exit %d ", *it.ExitCode)
		}
		s += oneLine(it.Output, 200)
		if it.ExitCode != nil && *it.ExitCode != 0 {
			return []string{paint(p.colour, "31", s)}
		}
		return []string{paint(p.colour, "90", s)}
	case it.Type == "agent_message" && typ == "item.completed":
		return []string{oneLine(it.Text, 300)}
	case it.Type == "error":
		return []string{paint(p.colour, "31", "error: "+oneLine(it.Message, 300))}
	case typ == "item.completed" && it.Type != "reasoning":
		return []string{it.Type + " " + oneLine(string(d["item"]), 160)}
	}
	return nil
}
