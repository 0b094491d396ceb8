package turns

import (
	"testing"
	"time"
)

// TestEventJSON pins the bytes a client sees of an event, in a page and on a live stream: ts in
// UTC with exactly milliseconds, job_seq, invalid and truncated only when set, and lines (what
// it says to a person) only when it says something.
func TestEventJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 120_456_789, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		name string
		e    Event
		want string
	}{
		{"session", Event{SessionID: "s1", Seq: 7, TurnID: "t1", TS: at, Type: "assistant", Data: []byte(`{"a": [1, 2]}`)},
			`{"seq":7,"turn":"t1","ts":"2026-01-02T02:04:05.120Z","type":"assistant","data":{"a":[1,2]}}`},
		{"job, invalid, truncated", Event{SessionID: "s1", Seq: 8, JobID: "j1", JobSeq: 2, TurnID: "t1", TS: at.Truncate(time.Second),
			Type: "invalid", Data: []byte(`"not json"`), Invalid: true, Truncated: true},
			`{"seq":8,"job_seq":2,"turn":"t1","ts":"2026-01-02T02:04:05.000Z","type":"invalid","data":"not json","invalid":true,"truncated":true,` +
				`"lines":[{"kind":"other","text":"(line cut: too long to keep whole)"}]}`},
		{"a tool call and its command", Event{SessionID: "s1", Seq: 9, TurnID: "t1", TS: at, Type: "assistant",
			Data: []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"npm test"}}]}}`)},
			`{"seq":9,"turn":"t1","ts":"2026-01-02T02:04:05.120Z","type":"assistant","data":{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"npm test"}}]}},` +
				`"lines":[{"kind":"tool_call","text":"$ npm test"}]}`},
	} {
		b, err := c.e.MarshalJSON()
		if err != nil || string(b) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.name, b, err, c.want)
		}
	}
}
