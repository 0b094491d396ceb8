package wire

// Sandbox is a sandbox. The daemon's address and access token stay inside hangar.
type Sandbox struct {
	Name       string            `json:"name"`
	Owner      string            `json:"owner"`
	Provider   string            `json:"provider"`
	ProviderID string            `json:"provider_id,omitempty"`
	State      string            `json:"state"`
	Reason     string            `json:"reason,omitempty"`
	Image      string            `json:"image,omitempty"`
	Template   string            `json:"template,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Daemon     bool              `json:"daemon"` // it has a daemon that answers exec
	// Metadata, EndAt and OnTimeout are a sandbox's made through the E2B API (docs/e2b.md): its
	// labels, when its time is up (absent: never) and what ends it then (kill or pause).
	Metadata  map[string]string `json:"metadata,omitempty"`
	EndAt     *Time             `json:"end_at,omitempty"`
	OnTimeout string            `json:"on_timeout,omitempty"`
	CreatedAt Time              `json:"created_at"`
	UpdatedAt Time              `json:"updated_at"`
}

// LoginShell is the command a client starts for a login shell on a terminal (`hangar exec -it
// SANDBOX` without a command): bash where the sandbox has it, else sh. The fleet calls such a
// process "a login shell" rather than show this line.
const LoginShell = "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh; fi"

// Process is a background process, as its owner sees it.
type Process struct {
	ID       string `json:"process_id"`
	Sandbox  string `json:"sandbox"`
	Owner    string `json:"owner"` // the id of the token that started it
	User     string `json:"user"`  // that token's user
	Command  string `json:"command"`
	Cwd      string `json:"cwd,omitempty"`
	PID      uint32 `json:"pid,omitempty"`
	State    string `json:"state"`            // running, exited or lost
	ExitCode *int   `json:"exit_code"`        // set once exited; -1 for a death by signal
	Status   string `json:"status,omitempty"` // e.g. "exit status 1", "signal: killed"
	Adopted  bool   `json:"adopted,omitempty"`
	Daemon   bool   `json:"daemon"`        // followed through the daemon (else polled)
	PTY      bool   `json:"pty,omitempty"` // runs on a terminal
	// The range of output offsets still kept: [output_start, output_end).
	OutputStart int64 `json:"output_start"`
	OutputEnd   int64 `json:"output_end"`
	// The times come last, where the process's own JSON (its stream's end event) has them, and
	// REST and MCP had them before wire.
	StartedAt Time  `json:"started_at"`
	EndedAt   *Time `json:"ended_at,omitempty"` // once it ended
}

// ProcessOutput is a process and its kept output from a since.
type ProcessOutput struct {
	Process  Process `json:"process"`
	Output   string  `json:"output"`
	Encoding string  `json:"encoding,omitempty"` // "base64" when the output is not valid UTF-8
	Gap      *Gap    `json:"gap,omitempty"`      // output since..gap.to is no longer kept
	Next     int64   `json:"next"`               // pass as since next time
}
