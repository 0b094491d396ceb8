package store

import (
	"context"
	"time"
)

// TurnStore keeps agent sessions, their turns, jobs and the events their run logs produce.
type TurnStore interface {
	// CreateSession stores a new session. ErrConflict when its id is taken, or its name among
	// its owner's sessions (names are unique per owner: two users may each have a "fix-bug").
	CreateSession(ctx context.Context, s Session) error
	// GetSession finds a session by id, or by name among owner's sessions; with owner "" by
	// id only. ErrNotFound if none.
	GetSession(ctx context.Context, owner, ref string) (Session, error)
	// ListSessions lists sessions by name: an owner's, or everyone's when owner is "".
	ListSessions(ctx context.Context, owner string) ([]Session, error)
	// SetSessionEnv replaces a session's env (its values sealed anew). ErrNotFound if none.
	SetSessionEnv(ctx context.Context, id string, env map[string]string) error
	// DeleteSession forgets a session with its turns and events. ErrNotFound if none.
	DeleteSession(ctx context.Context, id string) error

	// CreateTurn stores a new turn. ErrConflict when its id is taken or its session already
	// has a turn queued or running (one turn at a time per session).
	CreateTurn(ctx context.Context, t Turn) error
	// GetTurn finds a turn by id. ErrNotFound if none.
	GetTurn(ctx context.Context, id string) (Turn, error)
	// ListTurns lists a session's turns, oldest first.
	ListTurns(ctx context.Context, sessionID string) ([]Turn, error)
	// ListActiveTurns lists the turns queued or running, oldest first (what a restarted control
	// plane watches again).
	ListActiveTurns(ctx context.Context) ([]Turn, error)
	// RequestCancel records that a caller cancelled a queued or running turn, so the cancel
	// outlives a restart of the control plane. ErrNotFound if there is no such turn; ErrConflict
	// if it has ended.
	RequestCancel(ctx context.Context, id string) error
	// BeginLaunch records that the harness of a queued turn is about to be launched, before it
	// is: a control plane that later finds the turn still queued then knows that a harness may
	// run which no record names, and fails the turn rather than launch a second; one that finds
	// it queued and not launching runs it, since nobody launched anything for it. At most once
	// a turn, so at most one replica launches it: ErrConflict when the turn is not queued or its
	// launch began already; ErrNotFound if there is no such turn.
	BeginLaunch(ctx context.Context, id string) error
	// UpdateTurn moves a turn forward: to running from queued, or to an end state (done,
	// failed, cancelled) from queued or running, setting the fields of u that belong to that
	// state. ErrNotFound if there is no such turn; ErrConflict if the move would go backwards
	// or sideways (the turn's state stays as it was).
	UpdateTurn(ctx context.Context, u TurnUpdate) error

	// CreateJob stores a new job. ErrConflict when its id is taken.
	CreateJob(ctx context.Context, j Job) error
	// GetJob finds a job by id. ErrNotFound if none.
	GetJob(ctx context.Context, id string) (Job, error)
	// ListJobs lists jobs oldest first: a token's (tokenID set), an owner's (owner set), or
	// everyone's (both "").
	ListJobs(ctx context.Context, tokenID, owner string) ([]Job, error)

	// AppendEvents records events of one turn in one transaction: each gets the session's next
	// seq (gapless, unique, increasing even under concurrent appends) and, when a.JobID is set,
	// the job's next job seq. When a.ReadPos >= 0 the turn's read position moves from
	// a.FromPos to a.ReadPos in the same transaction; if the stored position is not a.FromPos
	// nothing is recorded and the error is ErrConflict (another watcher got there first).
	// When a.End is set and the turn cannot move to it (it ended already), nothing is recorded
	// either: ErrConflict. ErrNotFound if the session (or job, or turn) does not exist.
	// Returns the events as stored.
	AppendEvents(ctx context.Context, a EventAppend) ([]Event, error)
	// ListEvents lists a session's events with seq > since, oldest first, at most limit.
	ListEvents(ctx context.Context, sessionID string, since int64, limit int) ([]Event, error)
	// ListJobEvents lists a job's events with job seq > since, oldest first, at most limit.
	ListJobEvents(ctx context.Context, jobID string, since int64, limit int) ([]Event, error)
	// DeleteEventsBefore forgets the events recorded before the given time (the retention
	// setting) and says how many. Seqs are never reused: a session's next event still gets
	// the number after its newest.
	DeleteEventsBefore(ctx context.Context, before time.Time) (int, error)
}

// Turn states. A turn moves forward only: queued → running → one of the end states, or
// straight from queued to an end state.
const (
	TurnQueued    = "queued"
	TurnRunning   = "running"
	TurnDone      = "done"
	TurnFailed    = "failed"
	TurnCancelled = "cancelled"
)

// TurnEnded reports whether state is an end state.
func TurnEnded(state string) bool {
	return state == TurnDone || state == TurnFailed || state == TurnCancelled
}

// Session is a stored agent session.
type Session struct {
	ID        string
	Name      string
	Owner     string // the user it belongs to
	TokenID   string // the token that created it
	Sandbox   string
	Agent     string
	Env       map[string]string // passed to the agent; secrets (values sealed: turns.EnvPurpose), never returned by the API
	JobID     string            // the job it was made for; "" for none
	LastSeq   int64             // the seq of its newest event (0: none yet)
	CreatedAt time.Time
	// Split runs the agent as SplitUID (gid the same), its harness as root, with the run log
	// and status file where SplitUID cannot write.
	Split    bool
	SplitUID uint32
	// LastTurnState is the state of its newest turn ("": it has had none). Read with the
	// session, never written: the turns table holds it.
	LastTurnState string
}

// Turn is a stored turn: one run of the agent with a prompt.
type Turn struct {
	ID         string
	SessionID  string
	JobID      string
	Prompt     string
	State      string
	Dir        string // its directory in the sandbox: run log and status file
	ProcessTag string // the harness's process, to cancel it
	ProcessPID uint32
	// ProcessStart is the harness's start time (/proc/<pid>/stat starttime): with ProcessPID it
	// names one process, never a later one given the same pid. 0: not known (signal by pid).
	ProcessStart    uint64
	CancelRequested bool  // a caller cancelled it: it ends cancelled, even after a restart
	ReadPos         int64 // bytes of the run log recorded as events
	ExitCode        *int  // nil until it ended with one
	Signal          string
	Summary         string // JSON: what the classifier made of the run log
	Reason          string // why it failed or was cancelled, for a person
	CreatedAt       time.Time
	StartedAt       time.Time // zero until it runs
	EndedAt         time.Time // zero until it ends
	// Launching: its harness's launch began (BeginLaunch). Queued and launching, a harness may
	// run that no record names.
	Launching bool
}

// TurnUpdate moves a turn to State. For running: Dir, ProcessTag, ProcessPID, ProcessStart,
// StartedAt. For
// an end state: ExitCode, Signal, Summary, Reason, EndedAt (and StartedAt if it never ran).
type TurnUpdate struct {
	ID           string
	State        string
	Dir          string
	ProcessTag   string
	ProcessPID   uint32
	ProcessStart uint64
	ExitCode     *int
	Signal       string
	Summary      string
	Reason       string
	StartedAt    time.Time
	EndedAt      time.Time
}

// Job is a stored job: an unattended task with its sandbox, session and one turn.
type Job struct {
	ID             string
	TokenID        string // the token that created it: a jobs token sees only its own
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

// EventAppend is one AppendEvents call: events of one turn, and the read position they take
// the turn's run log to.
type EventAppend struct {
	SessionID string
	JobID     string
	TurnID    string
	FromPos   int64
	ReadPos   int64 // < 0: leave the turn's read position alone
	Events    []Event
	// End, when set, ends the turn (as UpdateTurn with an end state) in the same transaction,
	// so that no reader sees the turn ended without these events (its turn.finished).
	End *TurnUpdate
}
