package turns

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/store"
)

// reasonStderrBytes bounds how much of the agent's words a turn's reason quotes: of its
// stderr the last lines, of its own error the start; enough for the sentence an agent that
// gives up prints (the whole stderr tail is in the summary's stderr_tail, the whole error in
// its errors).
const reasonStderrBytes = 1 << 10

// summary is the turn's summary as stored and sent in turn.finished: the harness's summary of
// the run log, with the tail of the agent's stderr as its stderr_tail.
func (st harnessStatus) summary() string {
	if st.StderrTail == "" {
		return string(st.Summary)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(st.Summary, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m["stderr_tail"], _ = json.Marshal(st.StderrTail)
	b, _ := json.Marshal(m)
	return string(b)
}

// reason is why the turn ended, for a person, when it ended as state. The harness's own error
// (the agent could not run, the harness died) stands. A turn that failed otherwise says how
// the agent ended and why: what its output said (its last error, or the failed result's text),
// else the last lines of its stderr ("exit code 1: Not inside a trusted directory and
// --skip-git-repo-check was not specified."); "" when neither says anything.
func (st harnessStatus) reason(state string) string {
	if st.Error != "" || state != store.TurnFailed {
		return st.Error
	}
	why := firstBytes(st.agentSaid(), reasonStderrBytes)
	if why == "" {
		why = lastLines(st.StderrTail, reasonStderrBytes)
	}
	if why == "" {
		return ""
	}
	if st.Signal != "" {
		return "killed by " + st.Signal + ": " + why
	}
	return fmt.Sprintf("exit code %d: %s", st.ExitCode, why)
}

// agentSaid is why the agent's own output says it failed: its last reported error, else the
// text of a result that says it failed.
func (st harnessStatus) agentSaid() string {
	var sum struct {
		IsError bool     `json:"is_error"`
		Result  string   `json:"result"`
		Errors  []string `json:"errors"`
	}
	if json.Unmarshal(st.Summary, &sum) != nil {
		return ""
	}
	if n := len(sum.Errors); n > 0 && strings.TrimSpace(sum.Errors[n-1]) != "" {
		return strings.TrimSpace(sum.Errors[n-1])
	}
	if sum.IsError {
		return strings.TrimSpace(sum.Result)
	}
	return ""
}

// lastLines is the end of text, at most max bytes: from a line's start when one starts within
// them, else from a character's; without surrounding blank space.
func lastLines(text string, max int) string {
	text = strings.TrimSpace(text)
	if len(text) <= max {
		return text
	}
	text = text[len(text)-max:]
	if i := strings.IndexByte(text, '\n'); i >= 0 && i < len(text)-1 {
		return strings.TrimSpace(text[i+1:])
	}
	for len(text) > 0 && !utf8.RuneStart(text[0]) {
		text = text[1:]
	}
	return text
}

// firstBytes is the start of text, at most max bytes and whole characters, with "…" when cut.
func firstBytes(text string, max int) string {
	if len(text) <= max {
		return text
	}
	text = text[:max]
	for len(text) > 0 && !utf8.ValidString(text) {
		text = text[:len(text)-1]
	}
	return text + "…"
}
