package wire

// ExecResult is a command's result: REST exec's answer, the result event of exec/stream and
// MCP exec's structured result. Output that is not valid UTF-8 is sent base64, with
// stdout_encoding or stderr_encoding "base64", never mangled. (The jsonschema tags describe the
// fields in the MCP tool's output schema.)
type ExecResult struct {
	ExitCode       *int   `json:"exit_code" jsonschema:"the command's exit code; null when it did not end while the call lasted"`
	Status         string `json:"status,omitempty" jsonschema:"how the command ended, in the daemon's words"`
	Stdout         string `json:"stdout" jsonschema:"the last 256 KiB of its standard output"`
	StdoutEncoding string `json:"stdout_encoding,omitempty" jsonschema:"base64 when stdout is not valid UTF-8"`
	Stderr         string `json:"stderr" jsonschema:"the last 256 KiB of its standard error"`
	StderrEncoding string `json:"stderr_encoding,omitempty" jsonschema:"base64 when stderr is not valid UTF-8"`
	TimedOut       bool   `json:"timed_out" jsonschema:"killed because the timeout passed"`
	Streamed       bool   `json:"streamed" jsonschema:"the output was sent as progress notifications as it printed"`
	Via            string `json:"via" jsonschema:"daemon, or provider when the sandbox has no daemon"`
	Closed         string `json:"closed,omitempty" jsonschema:"why the stream ended before the command: shutdown, destroyed, paused or revoked"`
	Capped         bool   `json:"capped,omitempty" jsonschema:"the stream reached HANGAR_STREAM_MAX_BYTES and sent nothing more"`
}

// Output is the data of an output event (exec/stream's stdout and stderr, a process's
// output): the text, or, for bytes that are not valid UTF-8, their base64 with encoding
// "base64". REST writes it without reflection (rest's sseWriter.outputEvent).
type Output struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// Close is the data of an SSE stream's last event, close: why hangar ended it (the spec's
// close reasons: shutdown, lifetime, slow, revoked, limit, destroyed, ...).
type Close struct {
	Reason string `json:"reason"`
}

// ProcessAttach is MCP process attach's result: the process's state, the last 64 KiB of output
// the call saw (tail, from the offset tail_from; base64 with tail_encoding "base64" when not
// valid UTF-8) and next, the since of the next attach.
type ProcessAttach struct {
	ProcessID    string   `json:"process_id"`
	State        string   `json:"state"`
	ExitCode     *int     `json:"exit_code"`
	Status       string   `json:"status,omitempty"`
	Tail         string   `json:"tail"`
	TailEncoding string   `json:"tail_encoding,omitempty"`
	TailFrom     int64    `json:"tail_from"` // the offset the tail starts at
	Next         int64    `json:"next"`      // pass as since next time
	Gap          *Gap     `json:"gap,omitempty"`
	Streamed     bool     `json:"streamed"`
	Closed       string   `json:"closed,omitempty"`
	Capped       bool     `json:"capped,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}
