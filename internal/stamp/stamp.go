// Package stamp is the one way hangar writes a time for a client: RFC 3339 in UTC with exactly
// milliseconds. wire re-exports it (wire.Time) for the shapes it owns, which the transports, the
// domain's streams and the CLI all write and read. It imports no hangar package.
package stamp

import (
	"fmt"
	"time"
)

// Layout is how every time on the wire is written: RFC 3339 in UTC with exactly milliseconds
// (what the store keeps), so that times sort as strings and parse alike. encoding/json's own
// RFC3339Nano drops trailing zeros: .120Z, .12Z and no fraction at all.
const Layout = "2006-01-02T15:04:05.000Z"

// Time is a time as the wire writes it (Layout). It reads any RFC 3339 time.
type Time time.Time

// Of is t as a Time, or nil for the zero time (so a field can be null or left out).
func Of(t time.Time) *Time {
	if t.IsZero() {
		return nil
	}
	ts := Time(t)
	return &ts
}

// MarshalJSON writes t in Layout.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(Layout) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 time. null leaves t as it is, and "" is the zero time (how
// MCP's tools once wrote a time not yet set).
func (t *Time) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		return nil
	case `""`:
		*t = Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("read time %s: not a JSON string", b)
	}
	v, err := time.Parse(time.RFC3339, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("read time: %w", err)
	}
	*t = Time(v)
	return nil
}

// Time returns t as a time.Time (the zero time for a nil t).
func (t *Time) Time() time.Time {
	if t == nil {
		return time.Time{}
	}
	return time.Time(*t)
}
