package wire

import "encoding/json"

// Session is an agent session.
type Session struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Sandbox   string   `json:"sandbox"`
	Agent     string   `json:"agent"`
	Owner     string   `json:"owner"`
	Job       string   `json:"job,omitempty"`
	EnvKeys   []string `json:"env_keys"` // the names only: the values are secrets
	LastSeq   int64    `json:"last_seq"`
	CreatedAt *Time    `json:"created_at"`
	Split     bool     `json:"split"`               // its agent runs as split_uid, its harness as root
	SplitUID  uint32   `json:"split_uid,omitempty"` // set when split
	Events    string   `json:"events"`              // its events' MCP resource (SessionEventsURI)
	State     string   `json:"state"`               // its newest turn's state, or "idle" before its first
}

// Turn is one run of a session's agent with a prompt.
type Turn struct {
	ID        string          `json:"id"`
	Session   string          `json:"session"`
	Job       string          `json:"job,omitempty"`
	State     string          `json:"state"`
	Prompt    string          `json:"prompt"`
	ExitCode  *int            `json:"exit_code"`
	Signal    string          `json:"signal,omitempty"`
	Summary   json.RawMessage `json:"summary,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	CreatedAt *Time           `json:"created_at"`
	StartedAt *Time           `json:"started_at,omitempty"`
	EndedAt   *Time           `json:"ended_at,omitempty"`
}

// Job is an unattended task: its state is its turn's.
type Job struct {
	ID             string `json:"id"`
	Sandbox        string `json:"sandbox"`
	SandboxCreated bool   `json:"sandbox_created"`
	Session        string `json:"session"`
	State          string `json:"state"`
	Turn           *Turn  `json:"turn,omitempty"`
	CreatedAt      *Time  `json:"created_at"`
	Events         string `json:"events"` // its events' MCP resource (JobEventsURI)
}

// Event is one recorded event of a session (and of its job): data is the run-log line as
// written (a JSON string for a line that was not JSON, flagged invalid); lines is what it says
// to a person (internal/eventtext's), none when it says nothing.
type Event struct {
	Seq       int64           `json:"seq"`
	JobSeq    int64           `json:"job_seq,omitempty"`
	Turn      string          `json:"turn"`
	TS        Time            `json:"ts"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Invalid   bool            `json:"invalid,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	Lines     []Line          `json:"lines,omitempty"`
}

// Line is one line of what an event says, for a person: its kind (turn, start, message,
// thinking, tool_call, tool_output, result, usage, retry, error or other) and its text, on one
// line, never raw JSON.
type Line struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Events is a page of events and next, the since of the page after it.
type Events struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
}

// SessionEventsURI is the MCP resource of a session's events; ref is its name (for its owner)
// or its id.
func SessionEventsURI(ref string) string { return "hangar://sessions/" + ref + "/events" }

// JobEventsURI is the MCP resource of a job's events.
func JobEventsURI(id string) string { return "hangar://jobs/" + id + "/events" }

// TurnStarted is the data of turn.started, the event hangar records when a turn's agent
// starts. Its fields are in the order of their names, as hangar has always written them.
type TurnStarted struct {
	Agent string `json:"agent"`
	Turn  string `json:"turn"`
	Type  string `json:"type"` // turn.started
}

// TurnFinished is the data of turn.finished, the event hangar records when a turn ends: its
// status and how its agent ended, summary (the harness's, as JSON) and reason (for a person)
// when known. Its fields are in the order of their names, as hangar has always written them.
type TurnFinished struct {
	ExitCode *int            `json:"exit_code"` // null when unknown (killed by a signal, lost)
	Reason   string          `json:"reason,omitempty"`
	Signal   string          `json:"signal,omitempty"`
	Status   string          `json:"status"` // the turn's end state: done, failed or cancelled
	Summary  json.RawMessage `json:"summary,omitempty"`
	Turn     string          `json:"turn"`
	Type     string          `json:"type"` // turn.finished
}
