package rest

import "time"

// timestampLayout is how every time in a REST answer is written: RFC 3339 in UTC with exactly
// milliseconds (what the store keeps), so that times sort as strings and parse alike.
// encoding/json's own RFC3339Nano drops trailing zeros: .120Z, .12Z and no fraction at all.
const timestampLayout = "2006-01-02T15:04:05.000Z"

// timestamp is a time as REST writes it.
type timestamp time.Time

func (t timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timestampLayout) + `"`), nil
}

// stamp is t as a timestamp, or nil for the zero time.
func stamp(t time.Time) *timestamp {
	if t.IsZero() {
		return nil
	}
	ts := timestamp(t)
	return &ts
}
