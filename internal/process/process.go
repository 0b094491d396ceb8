// Package process runs background processes in sandboxes and lets their owners attach to them
// later. Each process has exactly one follower in hangar (follower.go), which feeds a ring
// buffer of the last output (stdout and stderr together, as a terminal shows them) addressed by
// absolute byte offsets: through the sandbox's daemon (daemon.go), or, without one, by polling
// the process's output file (polled.go). Attaching replays from an offset and subscribes under
// one lock, so nothing is missed or repeated; each attachment has its own stream from the
// registry, so one slow client never holds up the process or another client. Every follower
// runs under the Manager's root context, which Close cancels.
package process

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNotFound means no process of that id belongs to the caller's token in that sandbox.
	ErrNotFound error = &sentinel{Sentinel: problem.Sentinel{Text: "no such process", Code: problem.CodeNotFound,
		Message: "There is no such process in that sandbox, or it was not started by this token."},
		terminal: "There is no terminal %s of this token (it was closed more than 10 minutes ago, or never was)."}
	// ErrExited means the process has ended, so it takes no input (or signal).
	ErrExited error = &sentinel{Sentinel: problem.Sentinel{Text: "process has exited", Code: problem.CodeConflict,
		Message: "The process has exited."},
		terminal: "The terminal %s has exited: terminal_read shows how, terminal_open starts another."}
	// ErrNeedsDaemon means the sandbox has no daemon, which this needs.
	ErrNeedsDaemon error = &problem.Sentinel{Text: "this needs the sandbox's daemon", Code: problem.CodeConflict,
		Message: "This needs the sandbox's daemon, which it does not have."}
	// ErrInvalid means a request is malformed.
	ErrInvalid error = &problem.Sentinel{Text: "invalid process request", Code: problem.CodeBadRequest,
		Message: "The process request is not valid."}
)

// sentinel is a problem.Sentinel with words of its own for a terminal (an error in a
// *problem.TerminalError, from MCP's terminal tools): they name the terminal, with no detail.
type sentinel struct {
	problem.Sentinel
	terminal string // a format for the terminal's ID
}

// Problem is the terminal's words for the error on a terminal, else the Sentinel's.
func (s *sentinel) Problem(err error) *problem.Problem {
	var t *problem.TerminalError
	if errors.As(err, &t) {
		return &problem.Problem{Code: s.Code, Message: fmt.Sprintf(s.terminal, t.ID)}
	}
	return s.Sentinel.Problem(err)
}

// LimitError refuses a process past HANGAR_BACKGROUND_MAX_PER_TOKEN (per token, or per OAuth
// grant) or HANGAR_BACKGROUND_MAX_PER_USER.
type LimitError struct {
	Max int
	// Grant, for the per-token limit, says the token was issued by an OAuth grant, whose
	// tokens (a new one at each refresh) count together.
	Grant bool
	// User, when set, is the user whose limit it is (all its tokens together).
	User string
}

func (e *LimitError) Error() string {
	switch {
	case e.User != "":
		return fmt.Sprintf("user %s already has %d background processes running through its tokens, the most one user may (HANGAR_BACKGROUND_MAX_PER_USER); kill one first", e.User, e.Max)
	case e.Grant:
		return fmt.Sprintf("this token's OAuth grant already has %d background processes running through its tokens, the most one token may (HANGAR_BACKGROUND_MAX_PER_TOKEN); kill one first", e.Max)
	}
	return fmt.Sprintf("this token already has %d background processes running, the most it may (HANGAR_BACKGROUND_MAX_PER_TOKEN); kill one first", e.Max)
}

// Problem is a limit with its own sentence, and a hint to poll.
func (e *LimitError) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeLimit, Message: problem.Sentence(e.Error()), RetryAfter: problem.BackgroundRetryAfter}
}

// The events of an attachment's stream, besides output. Output items carry the bytes, with ID
// the offset just past them (what to pass as since to resume after them).
const (
	EventOutput = "output"
	EventGap    = "gap" // Data: a wire.Gap: output from..to is no longer kept (or was lost)
	EventEnd    = "end" // Data: the process's Info as JSON, once it ended
)

// Gap is output that is no longer kept: offsets From up to To. It goes out as a wire.Gap.
type Gap struct {
	From, To int64
	// Lost, when the gap reaches back before hangar took the process over (a restart, or
	// another replica), says so for a person: what the process printed while no hangar followed
	// it is lost, and the offsets skipped are not a count of bytes. Empty: the output was just
	// dropped from the ring.
	Lost string
}

// MarshalJSON writes g as the wire.Gap clients see.
func (g Gap) MarshalJSON() ([]byte, error) { return json.Marshal(wire.Gap(g)) }

// Config configures a Manager.
type Config struct {
	// Sandboxes finds sandboxes and their daemons. Required.
	Sandboxes *sandbox.Manager
	// Streams admits followers and attachments. Required.
	Streams *stream.Registry
	// Secret keys the MAC in process tags. Required: at least 32 bytes, kept across restarts.
	Secret []byte
	// Store keeps a record of each process started through the daemon, so a restarted control
	// plane follows again exactly those that its records say run (see AdoptAll). Nil: nothing
	// is recorded and nothing is adopted after a restart.
	Store store.Store
	// ReconnectMin and ReconnectMax bound the wait between a follower's attempts to reach its
	// process again after the daemon's stream broke (doubling from min to max). Defaults 250ms
	// and 30s.
	ReconnectMin, ReconnectMax time.Duration
	// MaxPerToken is how many running background processes one token may have; the tokens one
	// OAuth grant issued (a new one at each refresh) count as one. Default 16.
	MaxPerToken int
	// MaxPerUser is how many running background processes one user may have through all its
	// tokens, so that one user with many tokens cannot fill the stream registry with their
	// followers (each counts against the total of open streams). Default 64.
	MaxPerUser int
	// Retention is how long an exited process stays listed. Default 10m.
	Retention time.Duration
	// RingBytes is how much output is kept per process. Default 256 KiB.
	RingBytes int
	// OffsetReserve is how far ahead of a recorded process's output hangar records its offsets
	// as given out (store.Process.OutputEnd): one record write per this much output, and a
	// control plane that adopts the process starts its offsets there, past everything sent, so
	// they never go back even after a crash. Default 1 MiB.
	OffsetReserve int64
	// KillGrace is how long kill waits after SIGTERM before SIGKILL. Default 3s.
	KillGrace time.Duration
	// PollAttached and PollIdle are how often a process without a daemon has its output read:
	// while someone is attached, and otherwise. Defaults 500ms and 5s.
	PollAttached, PollIdle time.Duration
	// Clock is the one clock of the manager: the times of processes, retention, the kill
	// grace, polling and reconnecting. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Owners, with several replicas on one database, says which one follows each sandbox's
	// processes (replicas.go). Nil: this Manager follows them all.
	Owners Owners
}

// Manager runs and follows background processes. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex // guards procs, starting, startingIDs and closed, and orders wg.Add before Close's Wait
	procs    map[string]*proc
	starting map[string]int // per limitKeys key: starts under way, counted against MaxPerToken and MaxPerUser
	// startingIDs are the processes Start is starting: recorded already, not in procs yet, so
	// a concurrent list must not take them for processes to adopt.
	startingIDs map[string]bool
	// startingIn counts, per sandbox, the Starts past their ownership check and not yet
	// listed; Release waits for them (startDone), so a sandbox handed to another replica is
	// handed with every process it started recorded. releases counts each sandbox's Releases:
	// a Start that sees it moved lets go of what it started (the new owner adopts it).
	startingIn map[string]int
	releases   map[string]uint64
	startDone  *sync.Cond // on mu: a Start left startingIn
	closed     bool       // Close was called: no goroutine starts any more (see spawn)

	// ctx is the root of every follower's context and kill timer; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // followers and kill timers
}

// New returns a Manager. Close it to stop following (the processes run on).
func New(cfg Config) (*Manager, error) {
	if len(cfg.Secret) < 32 {
		return nil, errors.New("process manager: the secret must be at least 32 bytes")
	}
	if cfg.MaxPerToken <= 0 {
		cfg.MaxPerToken = 16
	}
	if cfg.MaxPerUser <= 0 {
		cfg.MaxPerUser = 64
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 10 * time.Minute
	}
	if cfg.RingBytes <= 0 {
		cfg.RingBytes = 256 << 10
	}
	if cfg.OffsetReserve <= 0 {
		cfg.OffsetReserve = 1 << 20
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 3 * time.Second
	}
	if cfg.PollAttached <= 0 {
		cfg.PollAttached = 500 * time.Millisecond
	}
	if cfg.PollIdle <= 0 {
		cfg.PollIdle = 5 * time.Second
	}
	if cfg.ReconnectMin <= 0 {
		cfg.ReconnectMin = 250 * time.Millisecond
	}
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = max(30*time.Second, cfg.ReconnectMin)
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, log: cfg.Logger, procs: map[string]*proc{}, starting: map[string]int{}, startingIDs: map[string]bool{},
		startingIn: map[string]int{}, releases: map[string]uint64{}, ctx: ctx, cancel: cancel}
	m.startDone = sync.NewCond(&m.mu)
	return m, nil
}

// State is where a process is in its life.
type State string

// The states of a process.
const (
	StateRunning State = "running"
	StateExited  State = "exited"
	// StateLost: hangar can no longer reach the process (its sandbox's daemon died, or the
	// sandbox failed), so it cannot tell whether it still runs. Its exit code is unknown (null).
	StateLost State = "lost"
)

// Info is what a process's owner sees of it; a client sees it as a wire.Process.
type Info struct {
	ID        string
	Sandbox   string
	Owner     string // the id of the token that started it
	User      string // that token's user
	Command   string
	Cwd       string
	PID       uint32
	State     State
	ExitCode  *int   // set once exited; -1 for a death by signal
	Status    string // e.g. "exit status 1", "signal: killed"
	Adopted   bool
	Daemon    bool // followed through the daemon (else polled)
	PTY       bool // runs on a terminal
	Killed    bool // a kill was asked for while it ran (Kill, CloseTerminal): its end is no failure
	StartedAt time.Time
	EndedAt   time.Time // zero while it runs
	// The range of output offsets still kept: [OutputStart, OutputEnd).
	OutputStart int64
	OutputEnd   int64
}

// Wire is i as a client sees it.
func (i Info) Wire() wire.Process {
	return wire.Process{ID: i.ID, Sandbox: i.Sandbox, Owner: i.Owner, User: i.User, Command: i.Command, Cwd: i.Cwd, PID: i.PID,
		State: string(i.State), ExitCode: i.ExitCode, Status: i.Status, Adopted: i.Adopted, Daemon: i.Daemon, PTY: i.PTY,
		StartedAt: wire.Time(i.StartedAt), EndedAt: wire.Stamp(i.EndedAt), OutputStart: i.OutputStart, OutputEnd: i.OutputEnd}
}

// MarshalJSON writes i as its wire.Process: the stream's end event is this.
func (i Info) MarshalJSON() ([]byte, error) { return json.Marshal(i.Wire()) }

// UnmarshalJSON reads i from its wire.Process (an end event).
func (i *Info) UnmarshalJSON(b []byte) error {
	var w wire.Process
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*i = Info{ID: w.ID, Sandbox: w.Sandbox, Owner: w.Owner, User: w.User, Command: w.Command, Cwd: w.Cwd, PID: w.PID,
		State: State(w.State), ExitCode: w.ExitCode, Status: w.Status, Adopted: w.Adopted, Daemon: w.Daemon, PTY: w.PTY,
		StartedAt: time.Time(w.StartedAt), EndedAt: w.EndedAt.Time(), OutputStart: w.OutputStart, OutputEnd: w.OutputEnd}
	return nil
}

// proc is one background process: what is known of it, its kept output and its attachments.
// Its follower feeds it.
type proc struct {
	id, owner, user      string // owner: the token id that started it
	grant                string // the OAuth grant that issued owner; "": none
	sandbox, tag         string
	command, cwd         string
	adopted, daemon, pty bool
	started              time.Time
	recorded             bool     // it has a record in the Store (set before it is listed)
	f                    follower // set before it is listed

	// adoptedAt is the offset this Manager took the process over at (adopted from its record):
	// a read from before it gets a gap that says lostNote. Zero: started here. Set before it is
	// listed.
	adoptedAt int64
	lostNote  string
	// mark is the offset its record says was given out (store.Process.OutputEnd); only its
	// follower's goroutine touches it (see Manager.reserve).
	mark int64

	stop     context.CancelFunc // stops its follower (set by run; guarded by mu)
	released bool               // Release let it go: run stops its follower at once (guarded by mu)

	exited chan struct{} // closed when the process ends

	mu       sync.Mutex // guards the fields below
	pid      uint32
	ring     *ring
	subs     map[*stream.Stream]struct{}
	state    State
	exit     *envd.Exit
	endedAt  time.Time
	killed   bool             // a kill is under way
	cursors  map[string]int64 // per token id: where its next ReadNext starts
	closedBy map[string]bool  // token ids that closed it (CloseTerminal)
}

// newProc is a running process, with nothing kept yet.
func newProc(ringBytes int) *proc {
	return &proc{ring: newRing(ringBytes), subs: map[*stream.Stream]struct{}{}, state: StateRunning,
		exited: make(chan struct{}), cursors: map[string]int64{}, closedBy: map[string]bool{}}
}

// attachments counts who is attached.
func (pr *proc) attachments() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.subs)
}

// ended reports whether the process has ended (or is lost).
func (pr *proc) ended() bool {
	select {
	case <-pr.exited:
		return true
	default:
		return false
	}
}

func (pr *proc) infoLocked() Info {
	i := Info{ID: pr.id, Sandbox: pr.sandbox, Owner: pr.owner, User: pr.user, Command: pr.command, Cwd: pr.cwd, PID: pr.pid, State: pr.state,
		Adopted: pr.adopted, Daemon: pr.daemon, PTY: pr.pty, Killed: pr.killed, StartedAt: pr.started, EndedAt: pr.endedAt,
		OutputStart: pr.ring.start, OutputEnd: pr.ring.end}
	if pr.exit != nil {
		i.Status = pr.exit.Status
		if pr.state == StateExited {
			code := pr.exit.Code
			i.ExitCode = &code
		}
	}
	return i
}

func (pr *proc) info() Info {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.infoLocked()
}

// output is the follower's: keep data, printed at at, and pass it to every attachment, under
// the lock that Attach takes to replay, so an attachment sees each byte exactly once.
func (pr *proc) output(data []byte, at time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	off := pr.ring.end
	pr.ring.write(data, at)
	for s := range pr.subs {
		sendOutput(s, data, off)
	}
}

// sendOutput queues data, which starts at offset off, in parts no bigger than the stream's
// items, each with the offset just past it.
func sendOutput(s *stream.Stream, data []byte, off int64) {
	for len(data) > 0 {
		n := min(len(data), s.MaxItem())
		off += int64(n)
		s.Send(stream.Item{Event: EventOutput, ID: strconv.FormatInt(off, 10), Data: data[:n]})
		data = data[n:]
	}
}

// end is the follower's when it is done with the process: it ended (StateExited, with exit),
// or it can no longer be reached (StateLost, exit has no code: only its Status counts). It
// reports false when the process had ended already.
func (pr *proc) end(state State, exit *envd.Exit, now time.Time) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.state != StateRunning {
		return false
	}
	pr.state, pr.exit, pr.endedAt = state, exit, now
	close(pr.exited)
	end := endItem(pr.infoLocked())
	for s := range pr.subs {
		s.Send(end)
		s.Finish()
	}
	pr.subs = map[*stream.Stream]struct{}{}
	return true
}

func endItem(i Info) stream.Item {
	b, _ := json.Marshal(i.Wire())
	return stream.Item{Event: EventEnd, ID: strconv.FormatInt(i.OutputEnd, 10), Data: b, JSON: true, Final: true}
}

// tagPrefix starts the daemon tag of every process hangar starts: hangar:<id>:<MAC>.
const tagPrefix = "hangar:"

// mac binds a process to its owner's token and its sandbox, so a tag cannot be forged by an
// agent that can start processes through its own daemon.
func (m *Manager) mac(owner, sandbox, id string) string {
	h := hmac.New(sha256.New, m.cfg.Secret)
	fmt.Fprintf(h, "%s\x00%s\x00%s", owner, sandbox, id)
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Manager) tag(owner, sandbox, id string) string {
	return tagPrefix + id + ":" + m.mac(owner, sandbox, id)
}

// parseTag returns the id of a tag whose MAC verifies for owner and sandbox.
func (m *Manager) parseTag(tag, owner, sandbox string) (string, bool) {
	rest, ok := strings.CutPrefix(tag, tagPrefix)
	if !ok {
		return "", false
	}
	id, sum, ok := strings.Cut(rest, ":")
	if !ok {
		return "", false
	}
	return id, hmac.Equal([]byte(sum), []byte(m.mac(owner, sandbox, id)))
}

// mine reports whether p may see and act on pr: the token that started it, or an admin.
func mine(p auth.Principal, pr *proc) bool {
	return pr.owner == p.TokenID || p.IsAdmin()
}

// lookup returns the caller's process id in sandbox sb, pruning expired ones first.
func (m *Manager) lookup(p auth.Principal, sb store.Sandbox, id string) (*proc, error) {
	m.prune()
	m.mu.Lock()
	pr, ok := m.procs[id]
	m.mu.Unlock()
	if !ok || !mine(p, pr) || pr.sandbox != sb.Name {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return pr, nil
}

// prune forgets processes that exited more than Retention ago.
func (m *Manager) prune() {
	cutoff := m.cfg.Clock.Now().Add(-m.cfg.Retention)
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, pr := range m.procs {
		pr.mu.Lock()
		gone := pr.state != StateRunning && !pr.endedAt.After(cutoff)
		pr.mu.Unlock()
		if gone {
			delete(m.procs, id)
		}
	}
}

// limitKeys are what a process counts under: its token's (the grant's, for a token an OAuth
// grant issued, since each refresh makes a new token id) and its user's ("" for none).
func limitKeys(token, grant, user string) (tok, usr string) {
	tok = "token " + token
	if grant != "" {
		tok = "grant " + grant
	}
	if user != "" {
		usr = "user " + user
	}
	return tok, usr
}

// runningLocked counts the running processes under the keys tok and usr (see limitKeys);
// m.mu is held.
func (m *Manager) runningLocked(tok, usr string) (byToken, byUser int) {
	for _, pr := range m.procs {
		pr.mu.Lock()
		if pr.state == StateRunning {
			t, u := limitKeys(pr.owner, pr.grant, pr.user)
			if t == tok {
				byToken++
			}
			if usr != "" && u == usr {
				byUser++
			}
		}
		pr.mu.Unlock()
	}
	return byToken, byUser
}

// admit reserves a slot for a process p starts, or refuses it with a *LimitError. A slot is
// reserved before the process starts, so concurrent starts cannot pass the limits together;
// the caller releases it (the func returned, with m.mu held) in the same hold of m.mu that
// lists the process, or once it failed to start: a process listed while its slot is still
// reserved would count twice, and starts near the limit were refused early (14 of 10,000 in
// bench/README.md's background mode).
func (m *Manager) admit(ctx context.Context, p auth.Principal) (releaseLocked func(), err error) {
	tok, usr := limitKeys(p.TokenID, p.Grant, p.User)
	tokOthers, usrOthers, err := m.runningElsewhere(ctx, tok, usr)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byToken, byUser := m.runningLocked(tok, usr)
	if byToken+m.starting[tok]+tokOthers >= m.cfg.MaxPerToken {
		return nil, &LimitError{Max: m.cfg.MaxPerToken, Grant: p.Grant != ""}
	}
	if usr != "" && byUser+m.starting[usr]+usrOthers >= m.cfg.MaxPerUser {
		return nil, &LimitError{Max: m.cfg.MaxPerUser, User: p.User}
	}
	keys := []string{tok}
	if usr != "" {
		keys = append(keys, usr)
	}
	for _, k := range keys {
		m.starting[k]++
	}
	return func() {
		for _, k := range keys {
			if m.starting[k]--; m.starting[k] <= 0 {
				delete(m.starting, k)
			}
		}
	}, nil
}

// StartRequest is a background process to start.
type StartRequest struct {
	Command string
	Cwd     string // "": the sandbox's workdir
	// PTY runs it on a pseudo-terminal of this size (a terminal): its output is what the
	// terminal shows, and input is typed into it. Nil: pipes. Needs the daemon.
	PTY *PTYSize
}

// PTYSize is a terminal's size in character cells.
type PTYSize struct {
	Cols, Rows uint32
}

// Start starts a background process in the sandbox ref and returns at once.
func (m *Manager) Start(ctx context.Context, p auth.Principal, ref string, req StartRequest) (Info, error) {
	if strings.TrimSpace(req.Command) == "" {
		return Info{}, fmt.Errorf("%w: command is empty", ErrInvalid)
	}
	if err := limits.CheckCommand(req.Command); err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := limits.CheckPath(req.Cwd); err != nil {
		return Info{}, fmt.Errorf("%w: cwd: %v", ErrInvalid, err)
	}
	sb, err := m.cfg.Sandboxes.Runnable(ctx, p, ref)
	if err != nil {
		return Info{}, err
	}
	released, err := m.ownedToStart(ctx, sb.Name)
	if err != nil {
		return Info{}, unstarted(err)
	}
	defer m.startEnded(sb.Name)
	releaseLocked, err := m.admit(ctx, p)
	if err != nil {
		return Info{}, err
	}
	listed := false
	defer func() {
		if !listed {
			m.mu.Lock()
			releaseLocked()
			m.mu.Unlock()
		}
	}()
	id := ids.Hex("p_", 12)
	pr := newProc(m.cfg.RingBytes)
	pr.id, pr.owner, pr.user, pr.grant, pr.sandbox, pr.tag = id, p.TokenID, p.User, p.Grant, sb.Name, m.tag(p.TokenID, sb.Name, id)
	pr.command, pr.cwd, pr.started, pr.daemon, pr.pty = req.Command, req.Cwd, m.cfg.Clock.Now(), sb.DaemonURL != "", req.PTY != nil
	if pr.pty && !pr.daemon {
		return Info{}, fmt.Errorf("%w: a terminal needs the sandbox's daemon, and %s has none", ErrNeedsDaemon, sb.Name)
	}
	m.mu.Lock()
	m.startingIDs[id] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.startingIDs, id)
		m.mu.Unlock()
	}()
	if pr.cwd == "" {
		pr.cwd = sb.Workdir
	}
	fst, err := m.cfg.Streams.Open(context.WithoutCancel(ctx), followerOptions(p))
	if err != nil {
		return Info{}, unstarted(err) // nothing was started yet
	}
	// The strategy: through the daemon when the sandbox has one, else polled.
	start := m.startPolled
	if pr.daemon {
		start = func(ctx context.Context, sb store.Sandbox, pr *proc) (follower, error) {
			return m.startDaemon(ctx, sb, pr, req.PTY)
		}
	}
	if pr.f, err = start(ctx, sb, pr); err != nil {
		fst.End(stream.ReasonError)
		fst.Close()
		return Info{}, err
	}
	m.mu.Lock()
	if m.releases[sb.Name] != released {
		// The sandbox went to another replica while this start was under way: that replica
		// follows the process (it adopts it by its record); this one lets go of it at once.
		pr.mu.Lock()
		pr.released = true
		pr.mu.Unlock()
	} else {
		m.procs[id] = pr
	}
	releaseLocked() // with the listing: no count sees the process twice
	listed = true
	m.mu.Unlock()
	m.run(pr, pr.f, fst)
	return pr.info(), nil
}

// followerOptions admit a follower: hangar's own stream on p's behalf, so p's revocation ends
// it (and kills the process). It is not tied to the sandbox: a paused sandbox's processes are
// followed again when it resumes, and a destroyed one's stream breaks by itself.
func followerOptions(p auth.Principal) stream.Options {
	return stream.Options{Kind: stream.KindFollower, Principal: p, Own: true, Unpaced: true}
}

// Close stops following every process (they run on in their sandboxes): it cancels the root
// context of every follower and kill timer, and waits for them to return.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for _, pr := range m.procs {
		pr.mu.Lock()
		for s := range pr.subs {
			s.End(stream.ReasonShutdown)
		}
		pr.mu.Unlock()
	}
	m.mu.Unlock()
	m.cfg.Streams.EndKind(stream.KindFollower, stream.ReasonShutdown)
	m.cancel()
	m.wg.Wait()
}

// Get returns the caller's process id in the sandbox ref (adopting its processes first when
// the id is unknown).
func (m *Manager) Get(ctx context.Context, p auth.Principal, ref, id string) (Info, error) {
	pr, _, err := m.find(ctx, p, ref, id)
	if err != nil {
		return Info{}, err
	}
	return pr.info(), nil
}

func (m *Manager) find(ctx context.Context, p auth.Principal, ref, id string) (*proc, store.Sandbox, error) {
	sb, err := m.cfg.Sandboxes.Get(ctx, p, ref)
	if err != nil {
		return nil, sb, err
	}
	if err := m.owned(ctx, sb.Name); err != nil {
		return nil, sb, err
	}
	pr, err := m.lookup(p, sb, id)
	if errors.Is(err, ErrNotFound) {
		m.adoptSandbox(ctx, sb)
		pr, err = m.lookup(p, sb, id)
	}
	return pr, sb, err
}

// List returns the caller's processes in the sandbox ref (an admin's: everyone's): running
// ones, and those that exited in the last Retention. Processes of the sandbox that the records
// say run and that this control plane does not follow yet are adopted first.
func (m *Manager) List(ctx context.Context, p auth.Principal, ref string) ([]Info, error) {
	sb, err := m.cfg.Sandboxes.Get(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if err := m.owned(ctx, sb.Name); err != nil {
		return nil, err
	}
	m.adoptSandbox(ctx, sb)
	m.prune()
	m.mu.Lock()
	var out []Info
	for _, pr := range m.procs {
		if mine(p, pr) && pr.sandbox == sb.Name {
			out = append(out, pr.info())
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out, nil
}

// OfUser lists the processes of every token of user that are still listed (running, or ended
// within Retention), oldest first: what a person's fleet shows. With several replicas, those
// the others follow too, as their records say.
func (m *Manager) OfUser(user string) []Info {
	m.prune()
	m.mu.Lock()
	var out []Info
	for _, pr := range m.procs {
		if pr.user == user {
			out = append(out, pr.info())
		}
	}
	m.mu.Unlock()
	out = append(out, m.ofUserElsewhere(user)...)
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}
