package process

import (
	"encoding/json"
	"testing"
	"time"
)

// TestInfoJSON pins the bytes a client sees of a process, running and ended, and of the end
// event its stream sends: times in UTC with exactly milliseconds, ended_at only once it ended.
func TestInfoJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 120_456_789, time.FixedZone("CET", 3600))
	code := 1
	running := Info{ID: "p1", Sandbox: "box", Owner: "tok", User: "ada", Command: "sleep 9", PID: 42, State: StateRunning,
		Daemon: true, StartedAt: at, OutputStart: 3, OutputEnd: 10}
	ended := running
	ended.State, ended.ExitCode, ended.Status, ended.EndedAt = StateExited, &code, "exit status 1", at.Add(time.Second)
	for _, c := range []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"running", func() ([]byte, error) { return json.Marshal(running) },
			`{"process_id":"p1","sandbox":"box","owner":"tok","user":"ada","command":"sleep 9","pid":42,"state":"running","exit_code":null,"daemon":true,"output_start":3,"output_end":10,"started_at":"2026-01-02T02:04:05.120Z"}`},
		{"ended", func() ([]byte, error) { return json.Marshal(ended) },
			`{"process_id":"p1","sandbox":"box","owner":"tok","user":"ada","command":"sleep 9","pid":42,"state":"exited","exit_code":1,"status":"exit status 1","daemon":true,"output_start":3,"output_end":10,"started_at":"2026-01-02T02:04:05.120Z","ended_at":"2026-01-02T02:04:06.120Z"}`},
		{"end event", func() ([]byte, error) { return endItem(ended).Data, nil },
			`{"process_id":"p1","sandbox":"box","owner":"tok","user":"ada","command":"sleep 9","pid":42,"state":"exited","exit_code":1,"status":"exit status 1","daemon":true,"output_start":3,"output_end":10,"started_at":"2026-01-02T02:04:05.120Z","ended_at":"2026-01-02T02:04:06.120Z"}`},
	} {
		b, err := c.got()
		if err != nil || string(b) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.name, b, err, c.want)
		}
	}
}

// TestGapJSON: a Gap marshalled as it is reads as the wire.Gap clients see.
func TestGapJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Gap{From: 1, To: 2})
	if err != nil || string(b) != `{"from":1,"to":2}` {
		t.Errorf("Gap = %s, %v; want {\"from\":1,\"to\":2}", b, err)
	}
}
