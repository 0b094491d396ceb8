package turns

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Event types hangar adds to a session's events around each turn's run-log lines.
const (
	TypeTurnStarted  = "turn.started"
	TypeTurnFinished = "turn.finished"
)

// StartTurn queues a turn in the session ref and starts it: it returns the turn at once
// (queued), while the harness is started in the sandbox and the run log watched. One turn at a
// time per session: ErrConflict while one is queued or running.
func (s *Service) StartTurn(ctx context.Context, p auth.Principal, ref, prompt string) (Turn, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return Turn{}, err
	}
	return turnOut(s.startTurn(ctx, se, "", newID("turn_"), prompt))
}

// MaxPrompt is the longest prompt: the agent gets it as one argument of its command line, which
// Linux bounds at 128 KiB with its ending NUL (MAX_ARG_STRLEN).
const MaxPrompt = 128<<10 - 1

// checkPrompt refuses a prompt that is empty, too long for an agent's command line or holds a
// NUL byte (no agent takes one, and PostgreSQL cannot store it).
func checkPrompt(prompt string) error {
	if strings.TrimSpace(prompt) == "" {
		return fmt.Errorf("%w: the prompt is empty", ErrInvalid)
	}
	if len(prompt) > MaxPrompt {
		return fmt.Errorf("%w: the prompt is %d bytes; an agent takes at most %d (128 KiB, as one argument of its command line)", ErrInvalid, len(prompt), MaxPrompt)
	}
	if strings.ContainsRune(prompt, 0) {
		return fmt.Errorf("%w: the prompt holds a NUL character", ErrInvalid)
	}
	return nil
}

func (s *Service) startTurn(ctx context.Context, se store.Session, jobID, turnID, prompt string) (store.Turn, error) {
	if err := checkPrompt(prompt); err != nil {
		return store.Turn{}, err
	}
	// Asked before the turn is stored: gaining the sandbox's lease from a replica that died
	// resumes its turns, and fails the queued ones.
	gen := s.released(se.Sandbox)
	mine := s.owns(ctx, se.Sandbox)
	t := store.Turn{ID: turnID, SessionID: se.ID, JobID: jobID, Prompt: prompt, State: store.TurnQueued, CreatedAt: s.cfg.Clock.Now().UTC()}
	if err := s.cfg.Store.CreateTurn(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Turn{}, fmt.Errorf("%w: session %s has a turn running; wait for it or cancel it", ErrConflict, se.Name)
		}
		return store.Turn{}, err
	}
	if !mine {
		// Another replica owns the sandbox: it runs the turn. Unless the lease was handed to
		// this one meanwhile, after it looked for queued turns to run (ResumeSandbox): the
		// notice reaches only the other replicas, and the old owner starts nothing more, so the
		// turn is taken here (TakeTurn runs it only while it is queued, and once).
		s.cfg.Replicas.Queued(ctx, t.ID)
		if s.owns(ctx, se.Sandbox) {
			s.TakeTurn(ctx, t.ID)
		}
		return t, nil
	}
	if !s.spawn(t.ID, se.Sandbox, func(ctx context.Context) { s.run(ctx, se, t, gen) }) {
		s.fail(ctx, se, t, "hangar shut down before the turn started")
		return store.Turn{}, fmt.Errorf("start turn: %w", stream.ErrShuttingDown)
	}
	return t, nil
}

// GetTurn returns a turn of the session ref.
func (s *Service) GetTurn(ctx context.Context, p auth.Principal, ref, turnID string) (Turn, error) {
	return turnOut(s.getTurn(ctx, p, ref, turnID))
}

func (s *Service) getTurn(ctx context.Context, p auth.Principal, ref, turnID string) (store.Turn, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return store.Turn{}, err
	}
	t, err := s.cfg.Store.GetTurn(ctx, turnID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.SessionID != se.ID) {
		return store.Turn{}, fmt.Errorf("%w: no turn %s in session %s", ErrNotFound, turnID, se.Name)
	}
	return t, err
}

// ListTurns lists the session's turns, oldest first.
func (s *Service) ListTurns(ctx context.Context, p auth.Principal, ref string) ([]Turn, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	ts, err := s.cfg.Store.ListTurns(ctx, se.ID)
	return fromStore(ts, fromStoreTurn), err
}

// CancelTurn cancels a turn: a queued one ends at once; a running one's harness gets SIGTERM
// (passed on to the agent's process group, SIGKILL after the harness's grace) and the turn
// ends cancelled when its status file says it ended. An ended turn is left as it is.
func (s *Service) CancelTurn(ctx context.Context, p auth.Principal, ref, turnID string) (Turn, error) {
	t, err := s.getTurn(ctx, p, ref, turnID)
	if err != nil {
		return Turn{}, err
	}
	return turnOut(s.cancelTurn(ctx, t))
}

func (s *Service) cancelTurn(ctx context.Context, t store.Turn) (store.Turn, error) {
	if store.TurnEnded(t.State) {
		return t, nil
	}
	// Recorded first, so the cancel outlives a restart: a control plane that stops before the
	// signal below is sent sends it again (Resume), and the end is recorded as cancelled.
	if err := s.cfg.Store.RequestCancel(ctx, t.ID); err != nil {
		if errors.Is(err, store.ErrConflict) { // it ended meanwhile
			return s.cfg.Store.GetTurn(ctx, t.ID)
		}
		return t, err
	}
	if t.State == store.TurnQueued {
		now := s.cfg.Clock.Now().UTC()
		err := s.end(ctx, t, store.TurnUpdate{State: store.TurnCancelled, Reason: "cancelled before it started", StartedAt: now, EndedAt: now})
		if err == nil || !errors.Is(err, store.ErrConflict) {
			return s.cfg.Store.GetTurn(ctx, t.ID)
		}
		// It started meanwhile: kill it below.
		var gerr error
		if t, gerr = s.cfg.Store.GetTurn(ctx, t.ID); gerr != nil {
			return t, gerr
		}
	}
	if err := s.signalHarness(ctx, t); err != nil {
		return t, err
	}
	s.poke(t.ID) // a watcher waiting for its next poll would see the end only then
	return s.cfg.Store.GetTurn(ctx, t.ID)
}

// signalHarness sends SIGTERM to a running turn's harness (passed on to the agent and all it
// started, SIGKILL after the harness's grace); the turn ends cancelled when its watcher reads the
// status file. Whatever the sandbox's state, a cancel ends the turn: when the daemon is gone
// or the sandbox failed, the signal goes through the provider's own exec; when nothing can be
// signalled (a sandbox destroyed or paused, or no exec answers) the turn ends cancelled here,
// with a reason that says so.
func (s *Service) signalHarness(ctx context.Context, t store.Turn) error {
	if t.State != store.TurnRunning || t.ProcessPID == 0 {
		return nil
	}
	_, sb, err := s.sandboxOf(ctx, t)
	if errors.Is(err, errSandboxGone) {
		return s.cancelled(ctx, t, "the sandbox was destroyed")
	}
	if err != nil {
		return err
	}
	switch sb.State {
	case string(provider.StatePaused):
		if s.stopPaused(ctx, sb, t) {
			return s.cancelled(ctx, t, "cancelled while the sandbox was paused")
		}
		// A paused sandbox runs no command; its processes stay stopped until it is resumed or
		// destroyed.
		return s.cancelled(ctx, t, "cancelled while the sandbox was paused: what the turn started is left stopped in it")
	case string(provider.StateFailed):
		sb = withoutDaemon(sb)
	}
	_, _, err = s.cfg.Sandboxes.Run(ctx, sb, killCmd(t), nil)
	if died := (*sandbox.DiedError)(nil); errors.As(err, &died) && died.State == string(provider.StateDestroyed) {
		return s.cancelled(ctx, t, "the sandbox was destroyed")
	}
	if err != nil && sb.DaemonURL != "" {
		s.log.Info("cancel a turn: the daemon did not answer; signalling through the provider", "turn", t.ID, "err", err)
		_, _, err = s.cfg.Sandboxes.Run(ctx, withoutDaemon(sb), killCmd(t), nil)
	}
	if err != nil {
		return s.cancelled(ctx, t, fmt.Sprintf("cancelled, but the turn's harness could not be signalled: %v", err))
	}
	return nil
}

// cancelled ends a running turn cancelled with reason, for a cancel that has nothing to signal.
func (s *Service) cancelled(ctx context.Context, t store.Turn, reason string) error {
	now := s.cfg.Clock.Now().UTC()
	err := s.end(ctx, t, store.TurnUpdate{State: store.TurnCancelled, Reason: reason, StartedAt: now, EndedAt: now})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// aliveCmd is a shell condition: true while the turn's harness runs. The harness leads its own
// process group; with its start time known, the pid must also be the same process (started
// then, not a zombie), never a later one that was given the same pid after a restart.
func aliveCmd(t store.Turn) string {
	if t.ProcessStart == 0 { // a turn from before start times were kept
		return fmt.Sprintf("kill -0 -%d 2>/dev/null", t.ProcessPID)
	}
	return fmt.Sprintf(`{ s=$(cat /proc/%[1]d/stat 2>/dev/null) && s=${s##*\) } && set -- $s && [ "$1" != Z ] && [ "${20}" = %[2]d ]; }`,
		t.ProcessPID, t.ProcessStart)
}

// killCmd sends SIGTERM to the turn's harness's process group if it is still the turn's.
func killCmd(t store.Turn) string {
	return fmt.Sprintf("if %s; then kill -TERM -%d 2>/dev/null; fi; true", aliveCmd(t), t.ProcessPID)
}

// cancelRequested reports whether a caller cancelled the turn (kept in the store: a cancel
// outlives a restart).
func (s *Service) cancelRequested(ctx context.Context, turnID string) bool {
	t, err := s.cfg.Store.GetTurn(ctx, turnID)
	return err == nil && t.CancelRequested
}

// sandboxOf returns a turn's session and sandbox, as the control plane (not a caller) sees them.
func (s *Service) sandboxOf(ctx context.Context, t store.Turn) (store.Session, store.Sandbox, error) {
	se, err := s.cfg.Store.GetSession(ctx, "", t.SessionID)
	if err != nil {
		return se, store.Sandbox{}, err
	}
	sb, err := s.sandboxFor(ctx, se)
	return se, sb, err
}

// errSandboxGone means a session's sandbox is no longer there: destroyed, or its name taken
// again by another sandbox (anyone's), which is never the session's.
var errSandboxGone = errors.New("the session's sandbox is gone")

// sandboxFor returns the sandbox a session was made in. A session names its sandbox, and names
// change hands: the sandbox of that name now is the session's only if it was made before the
// session and is not destroyed (a name taken again gets a new row, made after the session).
// Anything else is errSandboxGone, so a turn never runs, reads or kills in someone else's.
func (s *Service) sandboxFor(ctx context.Context, se store.Session) (store.Sandbox, error) {
	sb, err := s.cfg.Store.GetSandbox(ctx, se.Sandbox)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Sandbox{}, fmt.Errorf("%w: sandbox %s", errSandboxGone, se.Sandbox)
	case err != nil:
		return store.Sandbox{}, err
	case sb.CreatedAt.After(se.CreatedAt) || sb.State == string(provider.StateDestroyed):
		return store.Sandbox{}, fmt.Errorf("%w: sandbox %s was destroyed (a sandbox of that name made since is not this session's)", errSandboxGone, se.Sandbox)
	}
	return sb, nil
}

// turnRoot is the directory a turn's directory is made in, in its sandbox: Config's
// (SplitRunRoot for a split session's, when set), else the sandbox's provider's (a local
// sandbox's is in its folder, under the data dir: one tree per hangar and sandbox), else ""
// — the harness's binary picks it (harness.DefaultTurnRoot: /var/lib/hangar/turns for root).
func (s *Service) turnRoot(se store.Session, sb store.Sandbox) string {
	switch {
	case se.Split && s.cfg.SplitRunRoot != "":
		return s.cfg.SplitRunRoot
	case s.cfg.RunRoot != "":
		return s.cfg.RunRoot
	}
	return sb.Data["turns"]
}

// runLogPath is hangar's own copy of a turn's run log (the harness writes it; in a split
// session the agent cannot): the file a follower tails and a poll reads. "" before it runs.
func runLogPath(t store.Turn) string {
	if t.Dir == "" {
		return ""
	}
	return path.Join(t.Dir, "run.log")
}

// statusPath is the turn's status file, which alone says how the turn ended.
func statusPath(t store.Turn) string { return path.Join(t.Dir, "status.json") }

// shellQuote makes a single-quoted shell word.
func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

// launch makes t's directory in sb, writes its prompt there and starts the harness in it,
// detached, and returns the directory, the harness's pid (its process group) and its start
// time. A prompt that fits in one piece takes one command: turn-dir make, then the harness, in
// one shell; a longer one is written by makeTurnDir first.
func (s *Service) launch(ctx context.Context, se store.Session, sb store.Sandbox, t store.Turn) (string, int, uint64, error) {
	bin := s.cfg.HarnessBinary(sb)
	if bin == "" {
		return "", 0, 0, fmt.Errorf("no hangar harness in %s sandboxes yet", sb.Provider)
	}
	agent, ok := s.cfg.Agents[se.Agent]
	if !ok {
		return "", 0, 0, fmt.Errorf("unknown agent %q", se.Agent)
	}
	env, err := s.openEnv(se)
	if err != nil {
		return "", 0, 0, err
	}
	split := ""
	if se.Split {
		split = fmt.Sprintf("--split-uid %d --split-gid %[1]d ", se.SplitUID)
	}
	var argv []string
	for _, a := range agent.Argv {
		argv = append(argv, shellQuote(a))
	}
	harness := func(dir string) string {
		return fmt.Sprintf(`exec %s harness --detach %s--turn-dir %s -- %s 2>&1`, shellQuote(bin), split, dir, strings.Join(argv, " "))
	}
	dir, cmd := "", ""
	if len(t.Prompt) > promptPiece {
		if dir, err = s.makeTurnDir(ctx, se, sb, t); err != nil {
			return "", 0, 0, err
		}
		cmd = harness(shellQuote(dir))
	} else {
		// turn-dir make's own failure exits 100 more than its code, to tell it from the
		// harness's; its path is the answer's first line.
		cmd = fmt.Sprintf(`d=$(%s) || { c=$?; printf '%%s' "$d"; exit $((c + 100)); }; printf '%%s\n' "$d"; %s`,
			s.makeCmd(se, sb, t, []byte(t.Prompt)), harness(`"$d"`))
	}
	out, code, err := s.cfg.Sandboxes.Run(ctx, sb, cmd, env)
	if err != nil {
		return "", 0, 0, err
	}
	if dir == "" {
		if code >= 100 {
			return "", 0, 0, turnDirError(sb, code-100, out)
		}
		line, rest, _ := strings.Cut(string(out), "\n")
		if dir, out = line, []byte(rest); !path.IsAbs(dir) || path.Base(dir) != t.ID {
			return "", 0, 0, fmt.Errorf("making the turn's directory printed %q, not its path", line)
		}
	}
	if code != 0 {
		return "", 0, 0, fmt.Errorf("the harness did not start (exit code %d): %s", code, strings.TrimSpace(string(out)))
	}
	var pid int
	var start uint64
	if n, err := fmt.Sscan(string(out), &pid, &start); n < 1 || pid <= 0 {
		return "", 0, 0, fmt.Errorf("the harness printed %q, not its pid and start time: %v", out, err)
	}
	return dir, pid, start, nil
}

// promptPiece is how much of a prompt one command writes, base64-encoded into its command line:
// the whole line is one argument of sh -c, which the kernel bounds at 128 KiB.
const promptPiece = 48 << 10

// makeCmd is the command that makes t's directory in sb, with piece, the prompt's first piece,
// in it, and prints its path: hangar's binary does both (turn-dir make), never a shell. It
// makes the directory 0700 in a root of the sandbox user's that no other uid can write,
// checking every directory of the path as it walks it, so no agent can make it first, nor swap
// it or a part of its path for its own (harness.MakeTurnDir). The prompt goes base64-encoded,
// so that no shell reads it.
func (s *Service) makeCmd(se store.Session, sb store.Sandbox, t store.Turn, piece []byte) string {
	root := ""
	if r := s.turnRoot(se, sb); r != "" {
		root = " --root " + shellQuote(r)
	}
	return fmt.Sprintf(`exec %s turn-dir make --id %s%s --base64 %s 2>&1`, shellQuote(s.cfg.HarnessBinary(sb)),
		shellQuote(t.ID), root, shellQuote(base64.StdEncoding.EncodeToString(piece)))
}

// turnDirError is the error of a turn-dir make or append that exited code, saying out.
func turnDirError(sb store.Sandbox, code int, out []byte) error {
	if code == turnDirUnknown {
		return noTurnDir(sb)
	}
	return fmt.Errorf("could not make the turn's directory and write its prompt in the sandbox (exit code %d): %s", code, strings.TrimSpace(string(out)))
}

// makeTurnDir makes t's directory in sb with makeCmd and writes its prompt there, a piece per
// command (turn-dir append), so that its size is bound by no command line's, and returns the
// directory's path.
func (s *Service) makeTurnDir(ctx context.Context, se store.Session, sb store.Sandbox, t store.Turn) (string, error) {
	var dir string
	for i, rest := 0, []byte(t.Prompt); i == 0 || len(rest) > 0; i++ {
		piece := rest[:min(len(rest), promptPiece)]
		rest = rest[len(piece):]
		cmd := fmt.Sprintf(`exec %s turn-dir append --dir %s --base64 %s 2>&1`, shellQuote(s.cfg.HarnessBinary(sb)),
			shellQuote(dir), shellQuote(base64.StdEncoding.EncodeToString(piece)))
		if i == 0 {
			cmd = s.makeCmd(se, sb, t, piece)
		}
		out, code, err := s.cfg.Sandboxes.Run(ctx, sb, cmd, nil)
		if err != nil {
			return "", err
		}
		if code != 0 {
			return "", turnDirError(sb, code, out)
		}
		if i == 0 {
			dir = strings.TrimSpace(string(out))
			if !path.IsAbs(dir) || path.Base(dir) != t.ID {
				return "", fmt.Errorf("making the turn's directory printed %q, not its path", out)
			}
		}
	}
	return dir, nil
}

// run takes a queued turn through its life: start the harness, record turn.started, watch
// the run log until the status file appears, record turn.finished. gen is what released said
// before this replica was found to own the sandbox: a release since then starts nothing.
func (s *Service) run(ctx context.Context, se store.Session, t store.Turn, gen int) {
	if !s.beginStart(ctx, se.Sandbox, gen) {
		// Released (or closed) since: the sandbox's new owner runs the turn, still queued.
		return
	}
	// t was read before this replica knew it owns the sandbox (TakeTurn asks after reading,
	// and the answer can come late): the previous owner may have started it meanwhile, and
	// its Release waited for that start's record. Read from now on, as owner, the record says
	// whether the turn is still to start; a running one is watched, not launched again.
	cur, err := s.cfg.Store.GetTurn(s.ctx, t.ID)
	if err != nil || cur.State != store.TurnQueued {
		s.endStart(se.Sandbox)
		if err == nil && cur.State == store.TurnRunning && ctx.Err() == nil {
			if sb, err := s.sandboxFor(s.ctx, se); err == nil {
				s.watch(ctx, se, sb, cur)
			}
		}
		return
	}
	// The start runs to its record under the Service's context, not the watcher's: Release
	// waits for it rather than cut it short, since a harness launched and not recorded would
	// be launched again by the new owner.
	t, sb, ok := s.start(s.ctx, se, cur)
	s.endStart(se.Sandbox)
	if !ok || ctx.Err() != nil {
		return // it failed, or was released meanwhile: the new owner watches it from its record
	}
	s.watch(ctx, se, sb, t)
}

// start launches t's harness and records the turn running (and turn.started), or failed;
// false when it does not run.
func (s *Service) start(ctx context.Context, se store.Session, t store.Turn) (store.Turn, store.Sandbox, bool) {
	sb, err := s.sandboxFor(ctx, se)
	if err != nil {
		s.fail(ctx, se, t, fmt.Sprintf("sandbox %s: %v", se.Sandbox, err))
		return t, sb, false
	}
	// Recorded before the launch, so that a control plane that finds the turn still queued
	// knows whether a harness may run (Resume); and once, so that no other replica launches it.
	if err := s.cfg.Store.BeginLaunch(ctx, t.ID); errors.Is(err, store.ErrConflict) {
		return t, sb, false // another replica launched it (and watches it), or it ended
	} else if err != nil {
		s.fail(ctx, se, t, "record the start: "+err.Error())
		return t, sb, false
	}
	dir, pid, start, err := s.launch(ctx, se, sb, t)
	if err != nil {
		s.fail(ctx, se, t, "start the harness: "+err.Error())
		return t, sb, false
	}
	now := s.cfg.Clock.Now().UTC()
	err = s.cfg.Store.UpdateTurn(ctx, store.TurnUpdate{ID: t.ID, State: store.TurnRunning, Dir: dir, ProcessPID: uint32(pid), ProcessStart: start, StartedAt: now})
	if err != nil {
		// Cancelled while it started: stop what was started.
		s.log.Info("turn ended while its harness started", "turn", t.ID, "err", err)
		s.cfg.Sandboxes.Run(ctx, sb, killCmd(store.Turn{ProcessPID: uint32(pid), ProcessStart: start}), nil)
		return t, sb, false
	}
	data := startedData(t.ID, se.Agent)
	if _, err := s.appendEvents(ctx, store.EventAppend{SessionID: se.ID, JobID: t.JobID, TurnID: t.ID, ReadPos: -1,
		Events: []store.Event{{TS: now, Type: TypeTurnStarted, Data: data}}}); err != nil {
		s.log.Error("record turn.started", "turn", t.ID, "err", err)
	}
	t.State, t.Dir, t.ProcessPID, t.ProcessStart, t.StartedAt = store.TurnRunning, dir, uint32(pid), start, now
	if s.cancelRequested(ctx, t.ID) {
		// Cancelled between its start and the move to running: the cancel found no pid.
		if err := s.signalHarness(ctx, t); err != nil {
			s.log.Warn("cancel turn", "turn", t.ID, "err", err)
		}
	}
	return t, sb, true
}

// fail ends a turn that could not run.
func (s *Service) fail(ctx context.Context, se store.Session, t store.Turn, reason string) {
	s.log.Warn("turn failed", "turn", t.ID, "session", se.Name, "reason", reason)
	now := s.cfg.Clock.Now().UTC()
	s.end(ctx, t, store.TurnUpdate{State: store.TurnFailed, Reason: reason, StartedAt: now, EndedAt: now})
}

// end moves turn t to u's end state and records hangar's turn.finished event in one step, so no
// reader sees the turn ended without it. ErrConflict: it had ended already (a cancel, or
// another replica, got there first), and nothing is recorded.
func (s *Service) end(ctx context.Context, t store.Turn, u store.TurnUpdate) error {
	u.ID = t.ID
	data := finishedData(t.ID, u)
	_, err := s.appendEvents(ctx, store.EventAppend{SessionID: t.SessionID, JobID: t.JobID, TurnID: t.ID, ReadPos: -1,
		Events: []store.Event{{TS: s.cfg.Clock.Now().UTC(), Type: TypeTurnFinished, Data: data}}, End: &u})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		s.log.Error("end turn", "turn", t.ID, "state", u.State, "err", err)
	}
	return err
}

// Resume watches the turns the store says are running (a control plane restarted while they
// ran), from their saved read positions, and runs those still queued whose harness nobody began
// to launch (store.Turn.Launching); a queued turn whose launch began fails, since a harness may
// run that no record names. With several replicas, only the turns of the sandboxes this one
// owns.
func (s *Service) Resume(ctx context.Context) error {
	return s.resume(ctx, func(sandbox string) (int, bool) {
		gen := s.released(sandbox) // read before the lease is asked about, as for a start
		return gen, s.owns(ctx, sandbox)
	})
}

// resume is Resume for the turns whose sandbox mine says is this replica's; it also gives the
// release count to start a queued turn under (as run's gen).
func (s *Service) resume(ctx context.Context, mine func(sandbox string) (gen int, ok bool)) error {
	ts, err := s.cfg.Store.ListActiveTurns(ctx)
	if err != nil {
		return fmt.Errorf("resume turns: %w", err)
	}
	for _, t := range ts {
		se, sb, err := s.sandboxOf(ctx, t)
		if errors.Is(err, errSandboxGone) && t.State == store.TurnRunning {
			s.stop(ctx, t, store.TurnCancelled, "the sandbox was destroyed")
			continue
		}
		if errors.Is(err, errSandboxGone) {
			s.fail(ctx, se, t, err.Error())
			continue
		}
		if err != nil {
			s.log.Warn("resume turn", "turn", t.ID, "err", err)
			continue
		}
		gen, ok := mine(se.Sandbox)
		if !ok {
			continue
		}
		s.mu.Lock()
		watched := s.watching[t.ID] != nil
		s.mu.Unlock()
		if watched {
			continue
		}
		if t.State == store.TurnQueued && !t.Launching {
			// Nobody began to launch its harness: it runs here (run's BeginLaunch lets one
			// replica only launch it).
			s.spawn(t.ID, se.Sandbox, func(ctx context.Context) { s.run(ctx, se, t, gen) })
			continue
		}
		if t.State == store.TurnQueued {
			s.fail(ctx, se, t, ReasonLaunchCut)
			continue
		}
		if t.CancelRequested {
			// A cancel came just before the restart: its signal may not have been sent.
			if err := s.signalHarness(ctx, t); err != nil {
				s.log.Warn("resume a cancel", "turn", t.ID, "err", err)
			}
		}
		s.spawn(t.ID, se.Sandbox, func(ctx context.Context) { s.watch(ctx, se, sb, t) })
	}
	return nil
}

// ReasonLaunchCut is the reason of a turn that failed because the control plane (or the replica)
// that launched its harness stopped before it recorded the launch: the harness may run, or not,
// and launching a second could run the agent twice.
const ReasonLaunchCut = "the control plane stopped while it launched the turn's harness, before it recorded the launch"

// stopPaused signals the harness of t, whose sandbox sb is paused, through the provider's own
// exec, and reports whether that worked: a paused local sandbox stops only its daemon's
// session, so the harness and the agent, which left it, run on, and are ended so (the harness
// ends what the agent started); a paused container runs no command, and its processes stay
// stopped until it is resumed or destroyed.
func (s *Service) stopPaused(ctx context.Context, sb store.Sandbox, t store.Turn) bool {
	if t.ProcessPID == 0 {
		return false
	}
	_, code, err := s.cfg.Sandboxes.Run(ctx, withoutDaemon(sb), killCmd(t), nil)
	return err == nil && code == 0
}

// startedData is the data of the turn.started event hangar records when turn starts agent.
func startedData(turn, agent string) []byte {
	data, _ := json.Marshal(wire.TurnStarted{Type: TypeTurnStarted, Turn: turn, Agent: agent})
	return data
}

// finishedData is the data of the turn.finished event hangar records when turn ends as u says
// (nil when u's summary is not JSON).
func finishedData(turn string, u store.TurnUpdate) []byte {
	data, _ := json.Marshal(wire.TurnFinished{Type: TypeTurnFinished, Turn: turn, Status: u.State, ExitCode: u.ExitCode,
		Signal: u.Signal, Summary: json.RawMessage(u.Summary), Reason: u.Reason})
	return data
}
