package wire

// Fleet is one person's agents, inbox and summary: the data of a fleet answer and of its
// stream's snapshot.
type Fleet struct {
	User    string       `json:"user"`
	Agents  []FleetUnit  `json:"agents"`
	Inbox   []InboxItem  `json:"inbox"`
	Summary FleetSummary `json:"summary"`
}

// FleetUnit is one agent of a fleet: a session, or a job (whose session is not listed again).
// A fleet stream's agent event is one.
type FleetUnit struct {
	ID           string   `json:"id"` // the session's or the job's id
	Name         string   `json:"name"`
	Kind         string   `json:"kind"` // session or job
	Agent        string   `json:"agent"`
	Sandbox      string   `json:"sandbox"`
	SandboxState string   `json:"sandbox_state"` // running, paused, failed, destroyed, ... or gone
	State        string   `json:"state"`         // idle (no turn yet), or its current turn's state
	Stuck        bool     `json:"stuck,omitempty"`
	Turn         *TurnRef `json:"turn"`
	// Task is what it was asked to do: its current turn's prompt, its first line cut to
	// 100 characters ("" before its first turn).
	Task    string    `json:"task,omitempty"`
	Last    *Activity `json:"last,omitempty"`
	CostUSD float64   `json:"cost_usd"`
	// Tokens is what its turns used, as Codex reports it (Claude Code reports a cost instead).
	Tokens    *Tokens `json:"tokens,omitempty"`
	StartedAt Time    `json:"started_at"`
	// EndedAt is when its current turn ended; nil while it is queued or running, or idle.
	EndedAt   *Time `json:"ended_at,omitempty"`
	UpdatedAt Time  `json:"updated_at"`
	// LastActivityAt is when its newest event was recorded (any event); nil before the first.
	LastActivityAt *Time `json:"last_activity_at,omitempty"`
}

// TurnRef is a fleet unit's current turn.
type TurnRef struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	StartedAt *Time  `json:"started_at,omitempty"` // nil until it runs
}

// Tokens counts the tokens an agent's turns used.
type Tokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Activity is what a fleet unit did last: its latest tool call, message, result, error (a
// failed turn's reason included), API retry or start of a run.
type Activity struct {
	Kind string `json:"kind"` // tool_call, message, result, error, retry or start
	Text string `json:"text"`
	At   Time   `json:"at"`
}

// InboxItem is something in a fleet that needs its person.
type InboxItem struct {
	ID   string `json:"id"`   // stable: the same thing keeps its id
	Kind string `json:"kind"` // turn_failed, turn_done, stuck, job_finished, sandbox_failed, process_failed
	// State is the state of the agent's turn the item is about (done, failed, cancelled,
	// running), for the items of an agent.
	State   string `json:"state,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
	Process string `json:"process,omitempty"`
	Text    string `json:"text"`
	At      Time   `json:"at"`
}

// FleetSummary counts a fleet's units by state (a stuck unit as stuck, not running), and what
// they cost today (UTC). A fleet stream's summary event is one.
type FleetSummary struct {
	Agents       int            `json:"agents"`
	ByState      map[string]int `json:"by_state"`
	Stuck        int            `json:"stuck"`
	Inbox        int            `json:"inbox"`
	CostTodayUSD float64        `json:"cost_today_usd"`
}

// FleetSnapshot is a fleet stream's snapshot event: the whole fleet, and reset, for a person,
// when the resume position asked for was too old to go on from.
type FleetSnapshot struct {
	Fleet
	Reset string `json:"reset,omitempty"`
}

// FleetGone is a fleet stream's gone event: a unit that is no more.
type FleetGone struct {
	ID string `json:"id"`
}

// FleetInbox is a fleet stream's inbox event: the whole inbox, changed.
type FleetInbox struct {
	Inbox []InboxItem `json:"inbox"`
}

// Ticket is a one-time pass a browser opens its person's fleet stream with.
type Ticket struct {
	Ticket    string `json:"ticket"`
	ExpiresAt Time   `json:"expires_at"`
}
