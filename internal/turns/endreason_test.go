package turns

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
)

func TestEndReason(t *testing.T) {
	t.Parallel()
	codex := "Not inside a trusted directory and --skip-git-repo-check was not specified."
	cases := []struct {
		name  string
		st    harnessStatus
		state string
		want  string
	}{
		{"stderr only", harnessStatus{ExitCode: 1, Summary: json.RawMessage(`{"lines":0}`), StderrTail: "\n" + codex + "\n"},
			store.TurnFailed, "exit code 1: " + codex},
		{"the agent's error wins", harnessStatus{ExitCode: 1, Summary: json.RawMessage(`{"errors":["Reached maximum number of turns (1)"],"is_error":true,"result":"x"}`), StderrTail: "noise"},
			store.TurnFailed, "exit code 1: Reached maximum number of turns (1)"},
		{"a failed result", harnessStatus{ExitCode: 1, Summary: json.RawMessage(`{"is_error":true,"result":"API Error: 404"}`)},
			store.TurnFailed, "exit code 1: API Error: 404"},
		{"a signal", harnessStatus{ExitCode: -1, Signal: "SIGKILL", StderrTail: "out of memory"},
			store.TurnFailed, "killed by SIGKILL: out of memory"},
		{"the harness's error stands", harnessStatus{ExitCode: -1, Error: "start agent codex: not found", StderrTail: "x"},
			store.TurnFailed, "start agent codex: not found"},
		{"a long error, its start", harnessStatus{ExitCode: 1, Summary: json.RawMessage(`{"errors":["` + strings.Repeat("é", 600) + `"]}`)},
			store.TurnFailed, "exit code 1: " + strings.Repeat("é", 512) + "…"},
		{"nothing said", harnessStatus{ExitCode: 1, Summary: json.RawMessage(`{"lines":0}`)}, store.TurnFailed, ""},
		{"done", harnessStatus{StderrTail: "warning: something"}, store.TurnDone, ""},
		{"cancelled", harnessStatus{ExitCode: -1, Signal: "SIGTERM", StderrTail: "bye"}, store.TurnCancelled, ""},
		// 1 KiB of whole lines: "the end" and the 92 lines before it that fit.
		{"only the last lines", harnessStatus{ExitCode: 2, StderrTail: strings.Repeat("early line\n", 200) + "the end"},
			store.TurnFailed, "exit code 2: " + strings.Repeat("early line\n", 92) + "the end"},
	}
	for _, c := range cases {
		if got := c.st.reason(c.state); got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
	var sum map[string]any
	st := harnessStatus{Summary: json.RawMessage(`{"lines":2}`), StderrTail: codex}
	if err := json.Unmarshal([]byte(st.summary()), &sum); err != nil || sum["stderr_tail"] != codex || sum["lines"] != 2.0 {
		t.Errorf("summary %s, %v; want the harness's with stderr_tail", st.summary(), err)
	}
	if st := (harnessStatus{Summary: json.RawMessage(`{"lines":2}`)}); st.summary() != `{"lines":2}` {
		t.Errorf("summary without stderr = %s, want the harness's as it is", st.summary())
	}
}

// TestFailedTurnSaysWhy: an agent that says why it gives up on stderr alone (Codex outside a
// git repository) fails with that as its reason, and its turn.finished carries the tail.
func TestFailedTurnSaysWhy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	s := f.service(t)
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "cx1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	codex := "Not inside a trusted directory and --skip-git-repo-check was not specified."
	tu, err := s.StartTurn(ctx, ada, "cx1", `echo "`+codex+`" >&2; exit 1`)
	if err != nil {
		t.Fatal(err)
	}
	end := waitTurn(t, ctx, f.st, tu.ID)
	if end.State != store.TurnFailed || end.Reason != "exit code 1: "+codex {
		t.Errorf("turn %s, reason %q; want failed: exit code 1: %s", end.State, end.Reason, codex)
	}
	evs, err := f.st.ListEvents(ctx, se.ID, 0, 10)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events %v, %v", evs, err)
	}
	var fin struct {
		Reason  string `json:"reason"`
		Summary struct {
			StderrTail string `json:"stderr_tail"`
		} `json:"summary"`
	}
	last := evs[len(evs)-1]
	if json.Unmarshal(last.Data, &fin); last.Type != TypeTurnFinished || fin.Summary.StderrTail != codex || fin.Reason != end.Reason {
		t.Errorf("last event %s %s; want turn.finished with the reason and the stderr tail", last.Type, last.Data)
	}
}
