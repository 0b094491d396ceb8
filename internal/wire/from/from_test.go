package from_test

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC)

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionShape: a session has split, split_uid and its events' URI, by name for its owner
// and by id for anyone else (an admin, whose own session that name may be).
func TestSessionShape(t *testing.T) {
	t.Parallel()
	se := turns.Session{ID: "ses_1", Name: "s1", Owner: "ada", Sandbox: "box", Agent: "command", CreatedAt: at, Split: true, SplitUID: 1001, State: "running"}
	want := `{"id":"ses_1","name":"s1","sandbox":"box","agent":"command","owner":"ada","env_keys":[],"last_seq":0,` +
		`"created_at":"2026-01-02T03:04:05.120Z","split":true,"split_uid":1001,"events":"hangar://sessions/s1/events","state":"running"}`
	if got := jsonOf(t, from.Session(se, "ada")); got != want {
		t.Errorf("session as its owner sees it:\n%s\nwant\n%s", got, want)
	}
	if got := from.Session(se, "admin").Events; got != "hangar://sessions/ses_1/events" {
		t.Errorf("session as an admin sees it: events %s", got)
	}
}

// TestJobShape: a job's state is its turn's, queued until it has one; times not yet set are
// left out of its turn.
func TestJobShape(t *testing.T) {
	t.Parallel()
	j := turns.Job{ID: "job_1", Sandbox: "box", SessionID: "ses_1", CreatedAt: at}
	want := `{"id":"job_1","sandbox":"box","sandbox_created":false,"session":"ses_1","state":"queued",` +
		`"created_at":"2026-01-02T03:04:05.120Z","events":"hangar://jobs/job_1/events"}`
	if got := jsonOf(t, from.Job(j, nil)); got != want {
		t.Errorf("a job without its turn:\n%s\nwant\n%s", got, want)
	}
	tu := turns.Turn{ID: "turn_1", SessionID: "ses_1", JobID: "job_1", State: turns.TurnRunning, Prompt: "p", CreatedAt: at, StartedAt: at, Summary: "not json"}
	want = `{"id":"job_1","sandbox":"box","sandbox_created":false,"session":"ses_1","state":"running",` +
		`"turn":{"id":"turn_1","session":"ses_1","job":"job_1","state":"running","prompt":"p","exit_code":null,` +
		`"created_at":"2026-01-02T03:04:05.120Z","started_at":"2026-01-02T03:04:05.120Z"},` +
		`"created_at":"2026-01-02T03:04:05.120Z","events":"hangar://jobs/job_1/events"}`
	if got := jsonOf(t, from.Job(j, &tu)); got != want {
		t.Errorf("a job with its running turn:\n%s\nwant\n%s", got, want)
	}
}

// TestEventsNext: a page's next is its last event's seq (job seq for a job's), or since when
// it is empty; an empty page has events [].
func TestEventsNext(t *testing.T) {
	t.Parallel()
	evs := []turns.Event{{Seq: 7, JobSeq: 2, TS: at, Type: "x", Data: []byte(`{}`)}, {Seq: 9, JobSeq: 3, TS: at, Type: "y", Data: []byte(`"l"`), Invalid: true}}
	if p := from.Events(evs, 5, false); p.Next != 9 || len(p.Events) != 2 {
		t.Errorf("session page next %d, %d events", p.Next, len(p.Events))
	}
	if p := from.Events(evs, 1, true); p.Next != 3 {
		t.Errorf("job page next %d, want 3", p.Next)
	}
	if got := jsonOf(t, from.Events(nil, 4, false)); got != `{"events":[],"next":4}` {
		t.Errorf("empty page %s", got)
	}
}
