package turns

import (
	"cmp"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// TurnState is where a turn is. A turn moves forward only: queued → running → one of the end
// states, or straight from queued to an end state.
type TurnState string

// The turn states.
const (
	TurnQueued    TurnState = store.TurnQueued
	TurnRunning   TurnState = store.TurnRunning
	TurnDone      TurnState = store.TurnDone
	TurnFailed    TurnState = store.TurnFailed
	TurnCancelled TurnState = store.TurnCancelled
)

// Ended reports whether the state is an end state.
func (st TurnState) Ended() bool { return store.TurnEnded(string(st)) }

// Session is an agent session as callers see it: its env's values (secrets) are not in it,
// only their names.
type Session struct {
	ID        string
	Name      string
	Owner     string
	Sandbox   string
	Agent     string
	JobID     string   // the job it was made for; "" for none
	EnvKeys   []string // the names of the agent's env, sorted
	LastSeq   int64    // the seq of its newest event (0: none yet)
	CreatedAt time.Time
	Split     bool   // its agent runs as SplitUID, its harness as root
	SplitUID  uint32 // 0 unless Split
	// State is its newest turn's state, or SessionIdle when it has had no turn: running or
	// queued while it works, done/failed/cancelled as its last turn ended.
	State string
}

// SessionIdle is the State of a session that has had no turn yet.
const SessionIdle = "idle"

// Turn is one run of the agent with a prompt.
type Turn struct {
	ID        string
	SessionID string
	JobID     string
	Prompt    string
	State     TurnState
	ExitCode  *int // nil until it ended with one
	Signal    string
	Summary   string // JSON: what the classifier made of the run log
	Reason    string // why it failed or was cancelled, for a person
	// RunLog is the path in the sandbox of hangar's own copy of the run log (in a split
	// session, where the agent cannot write): what a follower tails. "" until it runs.
	RunLog    string
	CreatedAt time.Time
	StartedAt time.Time // zero until it runs
	EndedAt   time.Time // zero until it ends
}

// Job is an unattended task: its sandbox, session and one turn.
type Job struct {
	ID             string
	Owner          string
	Sandbox        string
	SandboxCreated bool // the job made the sandbox
	SessionID      string
	TurnID         string
	LastSeq        int64 // the job seq of its newest event
	CreatedAt      time.Time
}

// Event is one recorded event: a run-log line, or hangar's own turn.started / turn.finished.
type Event struct {
	SessionID string
	Seq       int64 // per session: gapless, from 1
	JobID     string
	JobSeq    int64 // per job: gapless, from 1; 0 outside a job
	TurnID    string
	TS        time.Time
	Type      string
	Data      []byte // a JSON value: the line as written, or a JSON string when Invalid
	Invalid   bool   // the line was not JSON
	Truncated bool   // the line was cut
}

// The conversions at the store boundary: callers of the Service never see store rows.

func fromStoreSession(se store.Session) Session {
	keys := make([]string, 0, len(se.Env))
	for k := range se.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return Session{ID: se.ID, Name: se.Name, Owner: se.Owner, Sandbox: se.Sandbox, Agent: se.Agent, JobID: se.JobID,
		EnvKeys: keys, LastSeq: se.LastSeq, CreatedAt: se.CreatedAt, Split: se.Split, SplitUID: se.SplitUID,
		State: cmp.Or(se.LastTurnState, SessionIdle)}
}

func fromStoreTurn(t store.Turn) Turn {
	return Turn{ID: t.ID, SessionID: t.SessionID, JobID: t.JobID, Prompt: t.Prompt, State: TurnState(t.State),
		ExitCode: t.ExitCode, Signal: t.Signal, Summary: t.Summary, Reason: t.Reason, RunLog: runLogPath(t),
		CreatedAt: t.CreatedAt, StartedAt: t.StartedAt, EndedAt: t.EndedAt}
}

func fromStoreJob(j store.Job) Job {
	return Job{ID: j.ID, Owner: j.Owner, Sandbox: j.Sandbox, SandboxCreated: j.SandboxCreated, SessionID: j.SessionID,
		TurnID: j.TurnID, LastSeq: j.LastSeq, CreatedAt: j.CreatedAt}
}

func fromStoreEvent(e store.Event) Event {
	return Event{SessionID: e.SessionID, Seq: e.Seq, JobID: e.JobID, JobSeq: e.JobSeq, TurnID: e.TurnID, TS: e.TS,
		Type: e.Type, Data: e.Data, Invalid: e.Invalid, Truncated: e.Truncated}
}

// fromStore converts a slice of store rows with conv.
func fromStore[S, T any](rows []S, conv func(S) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out
}

// turnOut converts a turn for a caller, passing err on.
func turnOut(t store.Turn, err error) (Turn, error) {
	if err != nil {
		return Turn{}, err
	}
	return fromStoreTurn(t), nil
}
