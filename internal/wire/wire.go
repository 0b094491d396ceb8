// Package wire owns the JSON a client sees of each entity — sandboxes, processes, sessions,
// turns, jobs, their events and a watch's changes — and the one layout of a time on the wire.
// REST answers and MCP tool results are these types, and the CLI decodes into them, so one
// entity has one shape whichever way it is read.
//
// wire imports no hangar package but stamp (the time layout, which the domain shares): it is
// not a server package, and the CLI may import it. Its subpackage from turns the domain's
// values into these types (the transports use it).
package wire

import (
	"time"

	"github.com/hangar-dev/hangar/internal/stamp"
)

// Time is a time as the wire writes it: stamp's layout, RFC 3339 in UTC with exactly
// milliseconds. It reads any RFC 3339 time.
type Time = stamp.Time

// Stamp is t as a Time, or nil for the zero time (so a field can be null or left out).
func Stamp(t time.Time) *Time { return stamp.Of(t) }
