package turns

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
)

// TestTurnEventsData pins the data of hangar's own events, turn.started and turn.finished, as
// they are recorded: exit_code always (null when unknown), signal, summary and reason only when
// set, and a summary that is not JSON leaves no data at all.
func TestTurnEventsData(t *testing.T) {
	t.Parallel()
	code := 1
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"started", startedData("t1", "claude"), `{"agent":"claude","turn":"t1","type":"turn.started"}`},
		{"done", finishedData("t1", store.TurnUpdate{State: store.TurnDone, ExitCode: new(int)}),
			`{"exit_code":0,"status":"done","turn":"t1","type":"turn.finished"}`},
		{"failed, all set", finishedData("t1", store.TurnUpdate{State: store.TurnFailed, ExitCode: &code, Signal: "SIGKILL",
			Summary: `{"lines": 3}`, Reason: "killed"}),
			`{"exit_code":1,"reason":"killed","signal":"SIGKILL","status":"failed","summary":{"lines":3},"turn":"t1","type":"turn.finished"}`},
		{"no exit code", finishedData("t1", store.TurnUpdate{State: store.TurnFailed, Reason: "lost"}),
			`{"exit_code":null,"reason":"lost","status":"failed","turn":"t1","type":"turn.finished"}`},
		{"summary not JSON", finishedData("t1", store.TurnUpdate{State: store.TurnFailed, Summary: "{"}), ``},
	} {
		if string(c.got) != c.want {
			t.Errorf("%s: got %s, want %s", c.name, c.got, c.want)
		}
	}
}
