package turns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// maxReadBytes bounds one read of a run log: an exec's output keeps at most 256 KiB
// (provider.MaxExecOutput), so a read asks for no more.
const maxReadBytes = 256 << 10

// harnessStatus is the part of the harness's status file a turn's end is made of (the
// harness package writes it; it imports this one, so the shape is restated here).
type harnessStatus struct {
	ExitCode int             `json:"exit_code"`
	Signal   string          `json:"signal"`
	Error    string          `json:"error"`
	Summary  json.RawMessage `json:"summary"`
	// StderrTail is the end of the agent's stderr (a few KiB of whole lines): kept with the
	// turn's summary, and its reason when the agent's output gives none (endreason.go).
	StderrTail string `json:"stderr_tail"`
}

// logReader reads a run log forward through the sandbox. pos is how far its events are
// recorded (saved with the turn); lines.readAt is how far it has read, past pos by a line not
// yet complete.
type logReader struct {
	s     *Service
	sb    store.Sandbox
	se    store.Session
	t     store.Turn
	pos   int64
	lines lineSplitter
	// followed counts the bytes following delivered; past Config.FollowMaxBytes the turn is
	// only polled.
	followed int64
	// noDaemon is set once the sandbox's daemon is gone: sb is read through its provider's exec,
	// and polled.
	noDaemon bool
	// old is set once the sandbox's hangar-envd turned out to have no turn-dir while the turn's
	// directory is in one of Config.OldRunRoots: a turn an older hangar started, read as it
	// did (cat, tail).
	old bool
	// noPoll is set once the sandbox's hangar-envd turned out to have no turn-poll (older than
	// it): the status and the log are read apart, with turn-dir read. Atomic: checkStatus reads
	// the status while the log is followed.
	noPoll atomic.Bool
}

// lineSplitter cuts bytes read from a log, chunk after chunk, into lines. readAt is the log
// offset after the bytes fed so far; pending holds the incomplete line's first MaxLineBytes+1
// bytes (enough for Classify to see it is too long and cut it).
type lineSplitter struct {
	readAt  int64
	pending []byte
}

// feed takes the next chunk and calls emit for each line it completes (without its newline),
// with the log offset just past the line's newline. emit must not keep line.
func (l *lineSplitter) feed(chunk []byte, emit func(line []byte, end int64)) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if room := MaxLineBytes + 1 - len(l.pending); room > 0 {
			l.pending = append(l.pending, part[:min(room, len(part))]...)
		}
		l.readAt += int64(len(part))
		if i < 0 {
			return
		}
		l.readAt++ // the newline
		emit(l.pending, l.readAt)
		l.pending = l.pending[:0]
		chunk = chunk[i+1:]
	}
}

// readFailureBound is how long a run of failed reads of a running turn may last before the
// turn ends failed with the last error: a watcher never polls for ever. Reads that fail because
// the sandbox is gone, paused or failed end the turn at once instead (unreadable).
const readFailureBound = time.Minute

// cancelPoll is how often a cancelled turn that is polled is read: its end comes within the
// harness's kill grace, and a client waits for it.
const cancelPoll = time.Second

// watch records a running turn's run log as events, each complete line once, moving the
// turn's read position with them, until the status file says the turn ended. It follows the log
// as it is written (follow) when it can, and polls it every PollInterval when it cannot; after a
// follow ends without the turn's end (the follower killed, the log truncated, the stream
// broken) it polls once before following again. When a read fails, unreadable decides by what
// became of the sandbox; a run of failures past readFailureBound ends the turn.
func (s *Service) watch(ctx context.Context, se store.Session, sb store.Sandbox, t store.Turn) {
	r := &logReader{s: s, sb: sb, se: se, t: t, pos: t.ReadPos, lines: lineSplitter{readAt: t.ReadPos}}
	poked := s.pokes(t.ID)
	interval := s.cfg.PollInterval
	followedLast := false
	var failing time.Time // when the current run of failed reads began; zero after a read
	for {
		if s.sandboxEnded(ctx, r) {
			return
		}
		st, ended, err := r.read(ctx)
		if errors.Is(err, errNotPrivate) || errors.Is(err, errNoTurnDir) {
			// Whatever it says could be another uid's, or it cannot be read at all: the turn
			// fails, and its harness is ended (it ends what the agent started).
			if serr := s.signalHarness(ctx, t); serr != nil {
				s.log.Warn("end a turn whose directory is not hangar's alone", "turn", t.ID, "err", serr)
			}
			s.stop(ctx, t, store.TurnFailed, fmt.Sprintf("hangar stopped reading the turn: %v", err))
			return
		}
		if err != nil && ctx.Err() == nil {
			st, ended, err = s.unreadable(ctx, r, err)
		}
		switch {
		case ctx.Err() != nil, errors.Is(err, errWatchOver):
			return
		case storeDown(err):
			// hangar's own store, not the sandbox, failed: the turn waits for it, however long
			// (the harness's run log and status file keep what it does meanwhile).
			failing = time.Time{}
			s.log.Warn("record a turn's events", "turn", t.ID, "err", err)
		case err != nil:
			now := s.cfg.Clock.Now()
			if failing.IsZero() {
				failing = now
			}
			if now.Sub(failing) >= readFailureBound {
				s.stop(ctx, t, store.TurnFailed, fmt.Sprintf("hangar could not read the turn's run log for %s: %v", readFailureBound, err))
				return
			}
			s.log.Warn("read turn run log", "turn", t.ID, "err", err)
		case ended:
			s.finish(ctx, se, t, st)
			return
		default:
			failing = time.Time{}
		}
		if !followedLast && s.cfg.Follow && err == nil && !r.noDaemon && r.followed < s.cfg.FollowMaxBytes {
			// A follow ends by itself once the status file is there (hangar tail --until), or
			// when following broke: either way the status is read again at once.
			followedLast = r.follow(ctx)
			continue
		}
		followedLast = false
		timer := s.cfg.Clock.NewTimer(interval, "turns", "poll")
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-poked:
			// Cancelled: read now, and, where the log cannot be followed (no daemon), every
			// cancelPoll until the harness has ended what the agent started.
			timer.Stop()
			interval = min(interval, cancelPoll)
		case <-timer.C:
		}
	}
}

// read reads the turn's status file, then its log. The status first: the harness writes it
// only after the last line, so a status seen before a read that reaches the end means nothing
// is left. When the sandbox's hangar-envd has no turn-dir and the turn's directory is in one of
// Config.OldRunRoots (a turn an older hangar started), it is read as that hangar did from then
// on; any other turn there cannot be read (errNoTurnDir).
func (r *logReader) read(ctx context.Context) (harnessStatus, bool, error) {
	st, ended, err := r.readOnce(ctx)
	if errors.Is(err, errNoTurnDir) && !r.old && r.s.oldTurn(r.t) {
		r.s.log.Info("the sandbox's hangar-envd has no turn-dir; reading a turn an older hangar started as it did", "turn", r.t.ID, "sandbox", r.sb.Name)
		r.old = true
		st, ended, err = r.readOnce(ctx)
	}
	return st, ended, err
}

// readOnce reads the status file, then the log: with one turn-poll where the sandbox's
// hangar-envd has it (the rest of a log longer than one read with turn-dir read), else with a
// read of each.
func (r *logReader) readOnce(ctx context.Context) (harnessStatus, bool, error) {
	st, ended, chunk, full, err := r.poll(ctx, maxReadBytes)
	if errors.Is(err, errNoPoll) {
		st, ended, err = r.readStatusApart(ctx)
		full = err == nil
	} else if err == nil {
		err = r.take(ctx, chunk)
	}
	if err == nil && full {
		err = r.drain(ctx)
	}
	return st, ended, err
}

// oldTurn reports whether t's directory is in one of Config.OldRunRoots.
func (s *Service) oldTurn(t store.Turn) bool {
	for _, root := range s.cfg.OldRunRoots {
		if path.Dir(t.Dir) == path.Clean(root) {
			return true
		}
	}
	return false
}

// errWatchOver means a turn's watcher has nothing more to do: the turn ended (here, or by a
// cancel).
var errWatchOver = errors.New("the turn ended")

// unreadable is called when a read of r's turn failed with err; it decides by what became of
// the turn and its sandbox. A turn ended meanwhile (a cancel), or that this ends, is
// errWatchOver: a sandbox destroyed (or whose name another took) ends it cancelled, a paused
// one failed. A sandbox that failed, or whose daemon died under the read, is read once more
// through its provider's own exec (the host's shell for local, docker exec while the container
// runs): when that works the watcher reads that way from then on, so a harness that ran on, or
// finished, is recorded as it is; when it does not, the turn ends failed with why. Any other
// err is returned as it is (the watcher bounds a run of them).
func (s *Service) unreadable(ctx context.Context, r *logReader, err error) (harnessStatus, bool, error) {
	if cur, gerr := s.cfg.Store.GetTurn(ctx, r.t.ID); gerr == nil && store.TurnEnded(cur.State) {
		return harnessStatus{}, false, errWatchOver
	}
	sb, gerr := s.sandboxFor(ctx, r.se)
	var died *sandbox.DiedError
	switch {
	case errors.Is(gerr, errSandboxGone), errors.As(err, &died) && died.State == string(provider.StateDestroyed):
		s.stop(ctx, r.t, store.TurnCancelled, "the sandbox was destroyed")
		return harnessStatus{}, false, errWatchOver
	case gerr != nil:
		return harnessStatus{}, false, err
	case sb.State == string(provider.StatePaused):
		s.stopPaused(ctx, sb, r.t)
		s.stop(ctx, r.t, store.TurnFailed, "the sandbox was paused while the turn ran")
		return harnessStatus{}, false, errWatchOver
	case sb.State != string(provider.StateFailed) && !(errors.As(err, &died) && died.State != string(provider.StateRunning)):
		return harnessStatus{}, false, err
	}
	if !r.noDaemon {
		r.sb, r.noDaemon = withoutDaemon(sb), true
		st, ended, rerr := r.read(ctx)
		if rerr == nil {
			s.log.Info("the sandbox's daemon is gone; reading the turn's run log through its provider", "turn", r.t.ID, "sandbox", sb.Name)
			return st, ended, nil
		}
		s.log.Info("the turn's run log cannot be read without the daemon either", "turn", r.t.ID, "err", rerr)
	}
	s.stop(ctx, r.t, store.TurnFailed, stoppedReason(sb, died))
	return harnessStatus{}, false, errWatchOver
}

// sandboxEnded ends r's turn if its sandbox was destroyed (cancelled) or paused (failed), and
// reports whether it did. Asked of the store before each read: a paused daemon would hold a
// read until its timeout.
func (s *Service) sandboxEnded(ctx context.Context, r *logReader) bool {
	sb, err := s.sandboxFor(ctx, r.se)
	switch {
	case errors.Is(err, errSandboxGone):
		s.stop(ctx, r.t, store.TurnCancelled, "the sandbox was destroyed")
		return true
	case err == nil && sb.State == string(provider.StatePaused):
		s.stopPaused(ctx, sb, r.t)
		s.stop(ctx, r.t, store.TurnFailed, "the sandbox was paused while the turn ran")
		return true
	}
	return false
}

// withoutDaemon is sb as its provider's own exec reaches it: commands run through the provider
// (sandbox.Manager.ExecStream without a daemon).
func withoutDaemon(sb store.Sandbox) store.Sandbox {
	sb.DaemonURL, sb.DaemonToken = "", ""
	return sb
}

// stoppedReason is a turn's reason for a person when its sandbox's daemon, or the sandbox,
// stopped under it and nothing more could be read.
func stoppedReason(sb store.Sandbox, died *sandbox.DiedError) string {
	why := sb.Reason
	if why == "" && died != nil {
		why = died.Reason
	}
	if (died != nil && died.Part == sandbox.PartDaemon) || strings.Contains(why, "daemon") {
		if why == "" {
			return "the sandbox's daemon stopped answering"
		}
		return "the sandbox's daemon stopped answering: " + why
	}
	if why == "" {
		why = "it is " + sb.State
	}
	return "the sandbox stopped: " + why
}

// stop ends a running turn that hangar stopped watching, with state and reason.
func (s *Service) stop(ctx context.Context, t store.Turn, state, reason string) {
	s.log.Warn("turn ended", "turn", t.ID, "state", state, "reason", reason)
	if state == store.TurnFailed && s.cancelRequested(ctx, t.ID) {
		state = store.TurnCancelled
	}
	s.endStored(ctx, t, store.TurnUpdate{State: state, Reason: reason, EndedAt: s.cfg.Clock.Now().UTC()})
}

// storeDown reports whether err is hangar's store not answering, or its disk full.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFull)
}

// endStored is end for a turn's watcher, which has nobody to hand a failure to: while the
// store does not answer (or its disk is full) it tries again every PollInterval until the end
// is stored, the turn ended otherwise, or ctx ends — an end that was never stored would leave
// the turn running for good, since nothing watches it any more.
func (s *Service) endStored(ctx context.Context, t store.Turn, u store.TurnUpdate) {
	for {
		if err := s.end(ctx, t, u); !storeDown(err) {
			return
		}
		timer := s.cfg.Clock.NewTimer(s.cfg.PollInterval, "turns", "end")
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// errNotPrivate means a turn's directory in its sandbox, or a directory above it, or a file in
// it, is not hangar's alone (harness.ErrNotPrivate, said by hangar's binary in the sandbox):
// what it holds cannot be trusted, and the turn ends failed with why.
var errNotPrivate = errors.New("the turn's directory in the sandbox is not hangar's alone")

// errNoTurnDir means the sandbox's hangar-envd is older than turn-dir (it answers it "unknown
// command", exit 2): it can neither make a turn's directory nor read one as this hangar does.
// Its sandbox was made before the upgrade, and must be made again to run turns.
var errNoTurnDir = errors.New("runs an older hangar-envd without turn-dir")

// noTurnDir is errNoTurnDir for sb, with what to do.
func noTurnDir(sb store.Sandbox) error {
	return fmt.Errorf("sandbox %s %w: destroy and recreate it to run turns", sb.Name, errNoTurnDir)
}

// Exit codes of `hangar-envd turn-dir` (sandboxcmd.ExitTurnFileMissing, ExitNotPrivate,
// restated: that package imports the harness, which runs in the sandbox). 2 is an unknown verb:
// a hangar-envd without turn-dir. Any other code is a failure that may pass (too many open
// files, no memory, killed), read again within readFailureBound.
const (
	turnDirUnknown    = 2
	turnDirMissing    = 3
	turnDirNotPrivate = 4
)

// readTurnFile is the shell command that prints name, of t's directory, from offset on (limit
// bytes at most; -1: all) through hangar's binary in the sandbox, which opens it as
// harness.OpenTurnDir says (no symlink, every directory of its path checked), with turn-dir's
// exit codes (its reason on stdout). Without the binary (a turn of a sandbox that has none
// now), or for an old turn (r.old), cat and tail, which check nothing; they exit 3 when the
// file is not there.
func (r *logReader) readTurnFile(name string, offset int64, limit int) string {
	file := shellQuote(path.Join(r.t.Dir, name))
	bin := r.s.cfg.HarnessBinary(r.sb)
	switch {
	case bin != "" && !r.old:
		return fmt.Sprintf("%s turn-dir read --dir %s --file %s --offset %d --limit %d 2>&1", shellQuote(bin), shellQuote(r.t.Dir), shellQuote(name), offset, limit)
	case limit < 0:
		return fmt.Sprintf("{ [ -e %[1]s ] || exit 3; cat %[1]s; }", file)
	}
	return fmt.Sprintf("{ [ -e %[1]s ] || exit 3; tail -c +%[2]d %[1]s | head -c %[3]d; }", file, offset+1, limit)
}

// readError is the error for a read of a turn's file that exited code, with what it said: one
// that says the turn's directory is not hangar's alone, or that the sandbox's hangar-envd has no
// turn-dir, ends the turn; any other may pass.
func (r *logReader) readError(what string, code int, said []byte) error {
	switch code {
	case turnDirNotPrivate:
		return fmt.Errorf("%w: %s", errNotPrivate, strings.TrimSpace(string(said)))
	case turnDirUnknown:
		return noTurnDir(r.sb)
	}
	return fmt.Errorf("read %s: exit code %d: %s", what, code, strings.TrimSpace(string(said)))
}

// readStatus reads the turn's status file: ended is false while there is none and the
// harness runs. A harness gone without a status file (killed before it could write one) ends
// the turn too, with an error that says so. errNotPrivate when the turn's directory is not
// hangar's alone, errNoTurnDir when the sandbox's hangar-envd has no turn-dir.
func (r *logReader) readStatus(ctx context.Context) (harnessStatus, bool, error) {
	st, ended, _, _, err := r.poll(ctx, 0)
	if errors.Is(err, errNoPoll) {
		return r.readStatusApart(ctx)
	}
	return st, ended, err
}

// errNoPoll means the sandbox has no turn-poll to read a turn with: its hangar-envd is older
// (it answers "unknown command", exit 2), or there is none, or the turn is an old one (r.old).
var errNoPoll = errors.New("no turn-poll in the sandbox")

// poll reads the status file, then (limit > 0) the run log from readAt, with one turn-poll,
// which checks the directory and the files as turn-dir read does and the harness's liveness
// as aliveCmd does: limit bounds its whole answer. full says the log may hold more than the
// answer had room for. errNoPoll when the sandbox has no turn-poll (from then on, for a
// hangar-envd without it).
func (r *logReader) poll(ctx context.Context, limit int) (st harnessStatus, ended bool, chunk []byte, full bool, err error) {
	bin := r.s.cfg.HarnessBinary(r.sb)
	if bin == "" || r.old || r.noPoll.Load() {
		return st, false, nil, false, errNoPoll
	}
	offset := int64(0)
	if limit > 0 { // not while following: checkStatus's reads of the status race with take
		offset = r.lines.readAt
	}
	cmd := fmt.Sprintf("exec %s turn-poll --dir %s --offset %d --limit %d --pid %d --start %d 2>&1",
		shellQuote(bin), shellQuote(r.t.Dir), offset, limit, r.t.ProcessPID, r.t.ProcessStart)
	out, code, err := r.s.cfg.Sandboxes.Run(ctx, r.sb, cmd, nil)
	switch {
	case err != nil:
		return st, false, nil, false, fmt.Errorf("read status file: %w", err)
	case code == turnDirUnknown:
		r.noPoll.Store(true)
		return st, false, nil, false, errNoPoll
	case code != 0:
		return st, false, nil, false, r.readError("status file and run log", code, out)
	}
	state, status, chunk, room, err := splitPoll(out)
	if err != nil {
		return st, false, nil, false, err
	}
	switch state {
	case "running":
		return st, false, chunk, len(chunk) >= room, nil
	case "gone":
		st = harnessStatus{ExitCode: -1, Error: "the harness ended without writing its status file"}
		return st, true, chunk, len(chunk) >= room, nil
	}
	if err := json.Unmarshal(status, &st); err != nil {
		return st, false, nil, false, fmt.Errorf("decode status file: %w", err)
	}
	return st, true, chunk, len(chunk) >= room, nil
}

// splitPoll splits turn-poll's answer: its line (STATE STATUS-BYTES LOG-ROOM), the status file
// and the run log's bytes.
func splitPoll(out []byte) (state string, status, chunk []byte, room int, err error) {
	line, rest, ok := bytes.Cut(out, []byte("\n"))
	var n int
	if ok {
		_, err = fmt.Sscanf(string(line), "%s %d %d", &state, &n, &room)
	}
	if !ok || err != nil || n < 0 || n > len(rest) || room < 0 || (state != "ended" && state != "running" && state != "gone") {
		return "", nil, nil, 0, fmt.Errorf("read status file and run log: turn-poll answered %.80q", out)
	}
	return state, rest[:n], rest[n:], room, nil
}

// readStatusApart is readStatus without turn-poll: a shell reads the status with turn-dir read
// (or cat, for an old turn), and checks the harness's liveness with aliveCmd.
func (r *logReader) readStatusApart(ctx context.Context) (harnessStatus, bool, error) {
	// The status is read again after the liveness check: the harness may write it and exit
	// between the two. The command's own codes: 10 not there while the harness runs, 11 not
	// there and the harness gone; otherwise the read's.
	cmd := fmt.Sprintf(`r() { %[1]s; }; o=$(r); c=$?; if [ $c = 3 ]; then %[2]s && exit 10; o=$(r); c=$?; fi; printf '%%s' "$o"; [ $c = 3 ] && exit 11; exit $c`,
		r.readTurnFile("status.json", 0, -1), aliveCmd(r.t))
	out, code, err := r.s.cfg.Sandboxes.Run(ctx, r.sb, cmd, nil)
	switch {
	case err != nil:
		return harnessStatus{}, false, fmt.Errorf("read status file: %w", err)
	case code == 10:
		return harnessStatus{}, false, nil
	case code == 11:
		return harnessStatus{ExitCode: -1, Error: "the harness ended without writing its status file"}, true, nil
	case code != 0:
		return harnessStatus{}, false, r.readError("status file", code, out)
	}
	var st harnessStatus
	if err := json.Unmarshal(out, &st); err != nil {
		return harnessStatus{}, false, fmt.Errorf("decode status file: %w", err)
	}
	return st, true, nil
}

// drain reads the log until a read comes back short, recording what it finds.
func (r *logReader) drain(ctx context.Context) error {
	for {
		out, code, err := r.s.cfg.Sandboxes.Run(ctx, r.sb, r.readTurnFile("run.log", r.lines.readAt, maxReadBytes), nil)
		switch {
		case err != nil:
			return fmt.Errorf("read run log: %w", err)
		case code == turnDirMissing: // not there yet
			return nil
		case code != 0:
			return r.readError("run log", code, out)
		}
		if err := r.take(ctx, out); err != nil {
			return err
		}
		if len(out) < maxReadBytes {
			return nil
		}
	}
}

// take records the complete lines of chunk (read at readAt) as events, in one append that
// moves the turn's read position past them.
func (r *logReader) take(ctx context.Context, chunk []byte) error {
	var evs []store.Event
	end := r.pos
	r.lines.feed(chunk, func(line []byte, lineEnd int64) {
		l := Classify(line)
		evs = append(evs, store.Event{TS: r.s.cfg.Clock.Now().UTC(), Type: l.Type, Data: l.Data, Invalid: l.Invalid, Truncated: l.Truncated})
		end = lineEnd
	})
	if len(evs) == 0 {
		return nil
	}
	_, err := r.s.appendEvents(ctx, store.EventAppend{SessionID: r.se.ID, JobID: r.t.JobID, TurnID: r.t.ID,
		FromPos: r.pos, ReadPos: end, Events: evs})
	if errors.Is(err, store.ErrConflict) {
		// Another watcher recorded these: carry on from where the store says it got to.
		t, gerr := r.s.cfg.Store.GetTurn(ctx, r.t.ID)
		if gerr != nil {
			return gerr
		}
		r.pos, r.lines = t.ReadPos, lineSplitter{readAt: t.ReadPos}
		return nil
	}
	if err != nil {
		r.lines = lineSplitter{readAt: r.pos} // nothing recorded: read these lines again
		return fmt.Errorf("record events: %w", err)
	}
	r.pos = end
	return nil
}

// finish ends the turn as its status file says.
func (s *Service) finish(ctx context.Context, se store.Session, t store.Turn, st harnessStatus) {
	state := store.TurnDone
	if st.ExitCode != 0 || st.Signal != "" || st.Error != "" {
		state = store.TurnFailed
	}
	if s.cancelRequested(ctx, t.ID) {
		state = store.TurnCancelled
	}
	var code *int
	if st.Signal == "" && st.ExitCode >= 0 {
		c := st.ExitCode
		code = &c
	}
	s.endStored(ctx, t, store.TurnUpdate{State: state, ExitCode: code, Signal: st.Signal, Summary: st.summary(), Reason: st.reason(state), EndedAt: s.cfg.Clock.Now().UTC()})
}

// followCommand is the command that follows the turn's run log from readAt, through the
// sandbox's daemon. With hangar's binary in the sandbox (the harness's), it is `hangar tail`:
// woken by inotify, so a line reaches the watcher as it is written, and ending by itself once
// the status file exists (a follower orphaned by a serve that went away ends with its turn).
// Without it (E2B's envd), GNU tail -F, which polls every 0.1 s on overlayfs. Either says on
// stderr when the log was truncated or replaced.
func (r *logReader) followCommand() string {
	log := shellQuote(runLogPath(r.t))
	bin := r.s.cfg.HarnessBinary(r.sb)
	if bin != "" && r.old { // an older hangar-envd: hangar tail, no turn-dir
		return fmt.Sprintf("exec %s tail -c +%d --until %s %s", shellQuote(bin), r.lines.readAt+1, shellQuote(statusPath(r.t)), log)
	}
	if bin != "" {
		// The directory is checked first (what it says goes to stderr: the follow ends, and
		// the next read, through turn-dir read, fails the turn with why). Once it is hangar's
		// alone, no other uid can change it while it is followed.
		return fmt.Sprintf("%[1]s turn-dir check --dir %[2]s >&2 && exec %[1]s tail -c +%[3]d --until %[4]s %[5]s",
			shellQuote(bin), shellQuote(r.t.Dir), r.lines.readAt+1, shellQuote(statusPath(r.t)), log)
	}
	return fmt.Sprintf("exec tail -F -s 0.1 -c +%d %s", r.lines.readAt+1, log)
}

// follow follows the run log from readAt through the daemon, recording lines as they come
// and checking the status file every PollInterval, until the follower ends (the status file is
// there, or the log was truncated or replaced: the follower says so on stderr), the stream
// breaks, the log passes FollowMaxBytes, the status file is seen, or ctx ends. What the
// follower read past the last recorded line is left to the next read from readAt.
//
// The follower is a stream of kind turn_log in the registry: hangar's own (no token), so it
// counts in HANGAR_STREAM_MAX_TOTAL and in no user's per-token limit; its queue carries the
// follower's output to this goroutine, paced like any stream (HANGAR_STREAM_BYTES_PER_SECOND:
// the daemon is held back when the queue is full) and capped (HANGAR_STREAM_MAX_BYTES, then
// polling carries on). When the registry is full, or absent, the turn is polled. It reports
// whether it followed at all.
func (r *logReader) follow(ctx context.Context) bool {
	if r.s.cfg.Streams == nil {
		return false
	}
	st, err := r.s.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindTurnLog, Sandbox: r.sb.Name})
	if err != nil {
		r.s.log.Info("cannot follow a run log; polling", "turn", r.t.ID, "err", err)
		return false
	}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // the follower is killed, the status checks stop
		wg.Wait()
		st.Close()
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.runFollower(fctx, st)
	}()
	go func() {
		defer wg.Done()
		r.checkStatus(fctx, st)
	}()
	for {
		items, err := st.Next(fctx, 0)
		if err != nil {
			return true // the follower ended, or the stream did: the status is read again
		}
		for _, it := range items {
			if it.Event == stream.EventCapped {
				return true // HANGAR_STREAM_MAX_BYTES: polling carries on
			}
			if err := r.take(ctx, it.Data); err != nil {
				r.s.log.Warn("record followed lines", "turn", r.t.ID, "err", err)
				st.End(stream.ReasonError)
				return true
			}
			if r.followed += int64(len(it.Data)); r.followed >= r.s.cfg.FollowMaxBytes {
				st.End(stream.ReasonLimit) // the cap: polling carries on
				return true
			}
		}
	}
}

// runFollower runs the follower, queueing its stdout on st, and ends st when it ends: Finish
// (what it queued is recorded first) when it exited, End when it said something on stderr
// (truncated, replaced: what is queued is read again from readAt) or the stream broke.
func (r *logReader) runFollower(ctx context.Context, st *stream.Stream) {
	err := r.s.cfg.Sandboxes.Follow(ctx, r.sb, r.followCommand(), func(name string, data []byte) {
		if name != "stdout" {
			r.s.log.Info("the run log changed under its follower; polling", "turn", r.t.ID, "says", string(bytes.TrimSpace(data)))
			st.End(stream.ReasonError)
			return
		}
		st.SendWait(ctx, stream.Item{Data: bytes.Clone(data)})
	})
	switch {
	case err != nil && ctx.Err() == nil:
		if !errors.Is(err, ErrCannotFollow) {
			r.s.log.Info("following a run log broke; polling", "turn", r.t.ID, "err", err)
		}
		st.End(stream.ReasonError)
	default:
		st.Finish()
	}
}

// checkStatus reads the status file every PollInterval while following, and finishes st once
// it is there: a tail -F never ends by itself, and a harness killed before it wrote the status
// file leaves none for hangar tail to wait for.
func (r *logReader) checkStatus(ctx context.Context, st *stream.Stream) {
	for {
		timer := r.s.cfg.Clock.NewTimer(r.s.cfg.PollInterval, "turns", "follow")
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-st.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if _, ended, err := r.readStatus(ctx); err == nil && ended {
			st.End(stream.ReasonDone)
			return
		}
	}
}
