package runlog

import "unicode/utf8"

// summaryTextBytes bounds each text a Summary keeps, and summaryErrors how many errors.
const (
	summaryTextBytes = 4 << 10
	summaryErrors    = 5
)

// Summary is what a turn's run log said, for a person: it is built line by line with Add and
// written into the harness's status file. It is informational: a turn's state and exit code
// come from the harness, never from what the agent printed.
type Summary struct {
	Lines     int `json:"lines"`
	Invalid   int `json:"invalid,omitempty"`   // lines that were not JSON
	Truncated int `json:"truncated,omitempty"` // lines cut at MaxLineBytes
	ToolCalls int `json:"tool_calls"`
	// ToolErrors counts tool results that say the tool failed.
	ToolErrors  int    `json:"tool_errors,omitempty"`
	LastCommand string `json:"last_command,omitempty"`
	// Results counts final results: Claude Code can print more than one in a run (a background
	// task finishing starts another turn), so the last one is the one that stands.
	Results int `json:"results"`
	// IsError says the last result reported a failure.
	IsError bool `json:"is_error"`
	// Result is the last result's text, else the agent's last text.
	Result       string   `json:"result,omitempty"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
	InputTokens  int64    `json:"input_tokens,omitempty"`
	OutputTokens int64    `json:"output_tokens,omitempty"`
	Errors       []string `json:"errors,omitempty"` // the last few errors the agent reported
	lastText     string
	resultText   bool
}

// Add takes one line into the summary.
func (s *Summary) Add(l Line) {
	s.Lines++
	if l.Invalid {
		s.Invalid++
	}
	if l.Truncated {
		s.Truncated++
	}
	for _, it := range l.Items {
		switch it.Kind {
		case KindText:
			s.lastText = cut(it.Text)
		case KindToolCall:
			s.ToolCalls++
			if it.Command != "" {
				s.LastCommand = cut(it.Command)
			}
		case KindToolResult:
			if it.IsError {
				s.ToolErrors++
			}
		case KindResult:
			s.Results++
			s.IsError = it.IsError
			s.Result, s.resultText = cut(it.Text), it.Text != ""
		case KindCost:
			if it.CostUSD != nil {
				s.CostUSD = it.CostUSD // cumulative: the latest stands
			}
			s.InputTokens += it.InputTokens
			s.OutputTokens += it.OutputTokens
		case KindError:
			s.Errors = append(s.Errors, cut(it.Text))
			if len(s.Errors) > summaryErrors {
				s.Errors = s.Errors[len(s.Errors)-summaryErrors:]
			}
		}
	}
	if !s.resultText {
		s.Result = s.lastText
	}
}

// cut shortens text to summaryTextBytes without splitting a character.
func cut(text string) string {
	if len(text) <= summaryTextBytes {
		return text
	}
	b := text[:summaryTextBytes]
	for len(b) > 0 && !utf8.ValidString(b) {
		b = b[:len(b)-1]
	}
	return b + "…"
}
