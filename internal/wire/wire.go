// Package wire owns the JSON a client sees of each entity — sandboxes, processes, sessions,
// turns, jobs, their events (and the data of hangar's own), a watch's changes and the fleet —
// and the one layout of a time on the wire. REST answers, MCP tool results and what the domain
// streams or records (an event, a change, a process's end, the fleet's events, turn.finished)
// are these types, and the CLI decodes into them, so one entity has one shape whichever way it
// is read.
//
// wire imports no hangar package but stamp (the time layout): it is a leaf, so the domain may
// write its streams in it and the CLI may decode with it. Its subpackage from turns the
// domain's values into these types for the transports' answers; the domain never imports it.
package wire

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/stamp"
)

// Time is a time as the wire writes it: stamp's layout, RFC 3339 in UTC with exactly
// milliseconds. It reads any RFC 3339 time.
type Time = stamp.Time

// Stamp is t as a Time, or nil for the zero time (so a field can be null or left out).
func Stamp(t time.Time) *Time { return stamp.Of(t) }

// Text is b as a JSON string and its encoding: b itself and "" when it is valid UTF-8, else
// its base64 and "base64" — output is never mangled.
func Text(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
