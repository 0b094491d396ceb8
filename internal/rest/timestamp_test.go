package rest

import (
	"encoding/json"
	"testing"
	"time"
)

// TestTimestampsHaveOnePrecision: every time is written with exactly milliseconds, in UTC,
// whatever its own fraction (encoding/json's default trims trailing zeros).
func TestTimestampsHaveOnePrecision(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), `"2026-01-02T03:04:05.000Z"`},
		{time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC), `"2026-01-02T03:04:05.120Z"`},
		{time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, time.UTC), `"2026-01-02T03:04:05.123Z"`},
		{time.Date(2026, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600)), `"2026-01-02T03:04:05.000Z"`},
	} {
		got, err := json.Marshal(timestamp(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%v: %s (%v), want %s", c.in, got, err, c.want)
		}
	}
	if stamp(time.Time{}) != nil {
		t.Error("the zero time is not left out")
	}
}
