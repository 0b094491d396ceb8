package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/seal"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNotFound means no session, turn or job of that name is visible to the caller.
	ErrNotFound error = &problem.Sentinel{Text: "not found", Code: problem.CodeNotFound,
		Message: "There is no such session, turn or job, or it is not yours."}
	// ErrConflict means a session name is taken, or a turn runs already in the session.
	ErrConflict error = &problem.Sentinel{Text: "conflict", Code: problem.CodeConflict,
		Message: "That conflicts with the session's state: a turn is running, or the name is taken."}
	// ErrInvalid means the request is malformed: empty prompt, unknown agent, bad name.
	ErrInvalid error = &problem.Sentinel{Text: "invalid request", Code: problem.CodeBadRequest, Message: "The request is not valid."}
	// ErrCannotFollow means a sandbox's output cannot be followed (it has no daemon): its turns'
	// run logs are polled.
	ErrCannotFollow = errors.New("cannot follow without a daemon")
)

// Sandboxes is what the turns need of the sandbox domain: who may see a sandbox, and running a
// short command in one (through its daemon, or the provider's exec without one).
type Sandboxes interface {
	// Get returns the sandbox ref if p may see it; an error wrapping sandbox.ErrNotFound if not.
	Get(ctx context.Context, p auth.Principal, ref string) (store.Sandbox, error)
	// Follow runs command in sb through its daemon until it ends or ctx does, passing its
	// output to out ("stdout" or "stderr") as it is printed. ErrCannotFollow when sb has no
	// daemon. out may block: the command then waits.
	Follow(ctx context.Context, sb store.Sandbox, command string, out func(stream string, data []byte)) error
	// Create makes a sandbox for p (a job given a spec).
	Create(ctx context.Context, p auth.Principal, req sandbox.CreateRequest) (name string, err error)
	// Run runs command (bash) in sb to its end with env added, and returns its stdout and exit
	// code. env holds secrets: it must not be logged.
	Run(ctx context.Context, sb store.Sandbox, command string, env map[string]string) (stdout []byte, exitCode int, err error)
}

// Config configures a Service. Zero values are defaults.
type Config struct {
	// Store keeps sessions, turns, jobs and events. Required.
	Store store.Store
	// Sandboxes runs the harness and reads the run logs. Required.
	Sandboxes Sandboxes
	// Agents by name. Default DefaultAgents().
	Agents map[string]Agent
	// HarnessBinary is the path of the hangar binary inside sb, run as `hangar harness`.
	// Required: local sandboxes run the host's binary; Docker mounts it at /opt/hangar/bin/hangar.
	HarnessBinary func(sb store.Sandbox) string
	// RunRoot is the directory in a sandbox that holds each turn's directory (run log, status
	// file, prompt), for every sandbox. Default: the sandbox's provider's (Data["turns"]: a
	// local sandbox's is in its folder under the data dir), else the one hangar-envd picks in
	// the sandbox (harness.DefaultTurnRoot: /var/lib/hangar/turns for root,
	// /tmp/hangar-turns-<uid> for another uid). hangar-envd makes it 0700 and checks it on
	// every use (harness.MakeTurnDir): it must be the sandbox user's, under directories no
	// other uid can write.
	RunRoot string
	// SplitRunRoot is RunRoot for split sessions' turns. Default: RunRoot's.
	SplitRunRoot string
	// OldRunRoots are where a hangar older than turn-dir made turns' directories with a shell.
	// A turn in one of them whose sandbox's hangar-envd has no turn-dir (a turn that hangar
	// started, still running after the upgrade) is read as it was then, with cat and tail;
	// any other turn there is read through turn-dir. Default /tmp/hangar-turns and
	// /var/lib/hangar/turns.
	OldRunRoots []string
	// PollInterval is how often a running turn's run log is read (session_poll_seconds).
	// Default 5s.
	PollInterval time.Duration
	// ReadBytes bounds one read of a run log. Default 4 MiB (more than a longest line).
	ReadBytes int
	// Follow makes a running turn's watcher follow its run log through the sandbox's daemon
	// (tail -F), recording each line as it is written; polling takes over whenever following
	// isn't possible. Off: polling only (HANGAR_STREAM_TURN_LOGS=false).
	Follow bool
	// FollowMaxBytes caps what one turn's log is followed for (HANGAR_STREAM_MAX_BYTES); past
	// it polling's bounded reads carry on. Default 64 MiB.
	FollowMaxBytes int64
	// EventRetention is how long events are kept (the retention setting); 0 keeps them.
	EventRetention time.Duration
	// Clock drives polling and retention and stamps events, turns, sessions and jobs. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Streams admits the live event streams (Follow, FollowJob): kind events. Required for
	// them.
	Streams *stream.Registry
	// EnvSeal seals sessions' env values before they are stored (keyed by the control plane's
	// secret, purpose EnvPurpose); they are opened only to launch a turn's harness. Nil: kept
	// as given (tests).
	EnvSeal *seal.Box
	// Replicas, with several replicas on one database, says which one runs and watches each
	// sandbox's turns, and carries the news of appended events to the others (replicas.go).
	// Nil: this Service is the only one.
	Replicas Replicas
}

// Service is the sessions, turns and jobs domain. It owns one watcher goroutine per running
// turn; Close stops them (the turns themselves run on in their sandboxes).
type Service struct {
	cfg Config
	log *slog.Logger

	ctx    context.Context // ends at Close: the watchers' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex          // guards watching, closed, releases and starting
	closed   bool                // Close was called: no turn starts
	watching map[string]*watcher // by turn id: the turns with a watcher
	// releases counts, per sandbox, the Releases of it: a turn start that finds the count
	// changed since it asked who owns the sandbox starts nothing (the new owner runs it).
	releases map[string]int
	starting map[string]int // per sandbox: turn starts under way (launched, not yet recorded)
	started  *sync.Cond     // on mu: broadcast when a start under way is recorded

	woken notifier // wakes the event streams' feeders after each append
}

// New returns a Service. Call Resume to watch the turns a previous control plane left running.
func New(cfg Config) *Service {
	if cfg.Agents == nil {
		cfg.Agents = DefaultAgents()
	}
	if cfg.OldRunRoots == nil {
		cfg.OldRunRoots = []string{"/tmp/hangar-turns", "/var/lib/hangar/turns"}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.ReadBytes <= 0 {
		cfg.ReadBytes = 4 << 20
	}
	if cfg.FollowMaxBytes <= 0 {
		cfg.FollowMaxBytes = 64 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, watching: map[string]*watcher{},
		releases: map[string]int{}, starting: map[string]int{}, woken: notifier{chans: map[string]*waiters{}}}
	s.started = sync.NewCond(&s.mu)
	return s
}

// Close stops watching and waits for the watchers to return. Turns keep running in their
// sandboxes; a new Service's Resume picks them up where the store says they were.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// newID returns a prefixed random id: lowercase, safe in a path and a shell word.
func newID(prefix string) string {
	return ids.New(prefix, 16)
}

// jobsOnly reports whether p may only see its own jobs: a jobs token without the user scope.
func jobsOnly(p auth.Principal) bool {
	return !p.Has(auth.ScopeUser) && p.Has(auth.ScopeJobs)
}

// sessionVisible reports whether p may see se: an admin every one; a user token its user's (a
// bound token only those in its sandbox); a jobs-only token none (it reaches its jobs' sessions
// through the jobs).
func sessionVisible(p auth.Principal, se store.Session) bool {
	if p.IsAdmin() {
		return true
	}
	if jobsOnly(p) {
		return false
	}
	return se.Owner == p.User && (p.Sandbox == "" || se.Sandbox == p.Sandbox)
}

// CreateSessionRequest is what a session is made from.
type CreateSessionRequest struct {
	Name    string
	Sandbox string
	Agent   string
	Env     map[string]string // the agent's env (API keys): passed to it, never returned
	// Split runs the agent as SplitUID (0: DefaultSplitUID) while its harness runs as root, with
	// the run log and status file where the agent cannot write. The sandbox's commands must run
	// as root.
	Split    bool
	SplitUID uint32
}

// DefaultSplitUID is the uid a split session's agent runs as unless told: the first user's uid
// on most images (E2B's "user", a Dockerfile's first useradd).
const DefaultSplitUID = 1000

// checkSplit checks that a split session's harness can run as root in sb and returns the
// agent's uid.
func (s *Service) checkSplit(ctx context.Context, sandboxName string, sb store.Sandbox, uid uint32) (uint32, error) {
	if uid == 0 {
		uid = DefaultSplitUID
	}
	out, code, err := s.cfg.Sandboxes.Run(ctx, sb, "id -u", nil)
	if err != nil {
		return 0, fmt.Errorf("split session: ask sandbox %s who runs its commands: %w", sandboxName, err)
	}
	if who := strings.TrimSpace(string(out)); code != 0 || who != "0" {
		hint := ""
		if sb.Provider == "kubernetes" {
			hint = " (hangar's Kubernetes sandbox pods run as a non-root uid unless it runs with HANGAR_K8S_RUN_AS_ROOT=true)"
		}
		return 0, fmt.Errorf("%w: a split session needs its sandbox's commands to run as root (its harness does, its agent as uid %d); sandbox %s runs them as uid %s%s",
			ErrInvalid, uid, sandboxName, who, hint)
	}
	return uid, nil
}

// maxSplitUID is the largest uid a split session's agent may run as (the harness takes a
// signed 32-bit uid).
const maxSplitUID = 1<<31 - 1

// checkAgentSetup refuses what a session's or job's agent could never be started with: an
// environment no process can have, or a split uid out of range.
func checkAgentSetup(env map[string]string, split bool, uid uint32) error {
	if err := limits.CheckEnv(env); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if split && uid > maxSplitUID {
		return fmt.Errorf("%w: split_uid %d: must be from 1 to %d", ErrInvalid, uid, maxSplitUID)
	}
	return nil
}

// CreateSession makes a session in a sandbox p may see.
func (s *Service) CreateSession(ctx context.Context, p auth.Principal, req CreateSessionRequest) (Session, error) {
	se, err := s.createSession(ctx, p, req)
	if err != nil {
		return Session{}, err
	}
	return fromStoreSession(se), nil
}

func (s *Service) createSession(ctx context.Context, p auth.Principal, req CreateSessionRequest) (store.Session, error) {
	if jobsOnly(p) {
		return store.Session{}, fmt.Errorf("%w: a jobs token can only start jobs", ErrNotFound)
	}
	if err := names.CheckLabel("session name", req.Name); err != nil {
		return store.Session{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, ok := s.cfg.Agents[req.Agent]; !ok {
		return store.Session{}, fmt.Errorf("%w: unknown agent %q (known: %s)", ErrInvalid, req.Agent, strings.Join(agentNames(s.cfg.Agents), ", "))
	}
	if err := checkAgentSetup(req.Env, req.Split, req.SplitUID); err != nil {
		return store.Session{}, err
	}
	sb, err := s.cfg.Sandboxes.Get(ctx, p, req.Sandbox)
	if err != nil {
		return store.Session{}, err
	}
	se := store.Session{ID: newID("ses_"), Name: req.Name, Owner: p.User, TokenID: p.TokenID, Sandbox: req.Sandbox,
		Agent: req.Agent, CreatedAt: s.cfg.Clock.Now().UTC(), Split: req.Split}
	se.Env = s.sealEnv(se.ID, req.Env)
	if req.Split {
		if se.SplitUID, err = s.checkSplit(ctx, req.Sandbox, sb, req.SplitUID); err != nil {
			return store.Session{}, err
		}
	}
	if err := s.cfg.Store.CreateSession(ctx, se); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Session{}, fmt.Errorf("%w: you have a session named %s", ErrConflict, req.Name)
		}
		return store.Session{}, err
	}
	return se, nil
}

// GetSession returns the session ref if p may see it. A name is looked up among p's user's own
// sessions (names are unique per owner); an id finds any session, which p then sees only if
// sessionVisible says so: so an admin reaches another user's session by its id.
func (s *Service) GetSession(ctx context.Context, p auth.Principal, ref string) (Session, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return Session{}, err
	}
	return fromStoreSession(se), nil
}

func (s *Service) getSession(ctx context.Context, p auth.Principal, ref string) (store.Session, error) {
	se, err := s.cfg.Store.GetSession(ctx, p.User, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sessionVisible(p, se)) {
		return store.Session{}, fmt.Errorf("%w: no session %s", ErrNotFound, ref)
	}
	return se, err
}

// ListSessions lists the sessions p may see.
func (s *Service) ListSessions(ctx context.Context, p auth.Principal) ([]Session, error) {
	if jobsOnly(p) {
		return nil, nil
	}
	owner := p.User
	if p.IsAdmin() {
		owner = ""
	}
	all, err := s.cfg.Store.ListSessions(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []Session
	for _, se := range all {
		if sessionVisible(p, se) {
			out = append(out, fromStoreSession(se))
		}
	}
	return out, nil
}

// DeleteSession forgets a session, its turns and events. A session with a turn running is
// ErrConflict: cancel the turn first.
func (s *Service) DeleteSession(ctx context.Context, p auth.Principal, ref string) error {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return err
	}
	if se.JobID != "" {
		return fmt.Errorf("%w: session %s belongs to job %s; it goes with its job", ErrConflict, se.Name, se.JobID)
	}
	ts, err := s.cfg.Store.ListTurns(ctx, se.ID)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if !store.TurnEnded(t.State) {
			return fmt.Errorf("%w: session %s has turn %s %s; cancel it first", ErrConflict, se.Name, t.ID, t.State)
		}
	}
	return s.cfg.Store.DeleteSession(ctx, se.ID)
}
