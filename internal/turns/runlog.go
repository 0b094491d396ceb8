package turns

import "github.com/hangar-dev/hangar/internal/turns/runlog"

// The run-log reader lives in package runlog, which the in-sandbox harness imports without
// the rest of turns (and so without the store, the providers and the metrics); these names
// keep turns' own spelling.

// MaxLineBytes is the longest run-log line recorded whole (runlog.MaxLineBytes).
const MaxLineBytes = runlog.MaxLineBytes

// Kinds of what a run-log line says (runlog's).
const (
	KindText       = runlog.KindText
	KindToolCall   = runlog.KindToolCall
	KindToolResult = runlog.KindToolResult
	KindCost       = runlog.KindCost
	KindResult     = runlog.KindResult
	KindError      = runlog.KindError
	KindStart      = runlog.KindStart
	KindRetry      = runlog.KindRetry
	// TypeInvalid is the type of an event whose line is not JSON.
	TypeInvalid = runlog.TypeInvalid
)

type (
	// Line is one run-log line made ready to record (runlog.Line).
	Line = runlog.Line
	// Item is one thing a line says (runlog.Item).
	Item = runlog.Item
	// Summary is what a turn's run log said, for a person (runlog.Summary).
	Summary = runlog.Summary
)

// Classify turns one run-log line (without its newline) into a Line (runlog.Classify).
func Classify(raw []byte) Line { return runlog.Classify(raw) }
