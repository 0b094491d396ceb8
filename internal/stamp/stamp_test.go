package stamp_test

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/stamp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTimesHaveOneLayout: every time is written with exactly milliseconds, in UTC, whatever
// its own fraction (encoding/json's default trims trailing zeros), and reads back.
func TestTimesHaveOneLayout(t *testing.T) {
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
		got, err := json.Marshal(stamp.Time(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%v: %s (%v), want %s", c.in, got, err, c.want)
		}
		var back stamp.Time
		if err := json.Unmarshal(got, &back); err != nil || !time.Time(back).Equal(c.in.Truncate(time.Millisecond)) {
			t.Errorf("%s reads back as %v (%v)", got, time.Time(back), err)
		}
	}
	if stamp.Of(time.Time{}) != nil {
		t.Error("the zero time is not left out")
	}
}

// TestTimeReads: a time reads from RFC 3339 in any zone; "" and null are no time; anything
// else is an error.
func TestTimeReads(t *testing.T) {
	t.Parallel()
	var s struct {
		A stamp.Time  `json:"a"`
		B *stamp.Time `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a": "2026-01-02T04:04:05+01:00", "b": null}`), &s); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !time.Time(s.A).Equal(want) || s.B != nil || !s.B.Time().IsZero() {
		t.Errorf("read %v, %v; want %v and nil", time.Time(s.A), s.B, want)
	}
	if err := json.Unmarshal([]byte(`{"a": ""}`), &s); err != nil || !time.Time(s.A).IsZero() {
		t.Errorf(`"" read as %v (%v), want the zero time`, time.Time(s.A), err)
	}
	for _, bad := range []string{`{"a": "yesterday"}`, `{"a": 12}`} {
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
