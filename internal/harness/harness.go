// Package harness runs one turn of an agent inside a sandbox: `hangar harness`. It sets
// no_new_privs, leaves its parent's session so the turn outlives whoever started it, runs the
// agent with the prompt, copies the agent's stdout line by line into hangar's own run log and
// keeps the tail of its stderr, ends everything the agent started when the agent exits or the
// turn is cancelled, and then writes a status file atomically. In a split sandbox the agent runs under another
// uid, and the run log and status file live where that uid cannot write: the turn's outcome
// comes from the status file, never from what the agent printed.
package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/coder/quartz"
	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/turns/runlog"
)

// PromptArg is the argument of the agent's command line that the prompt replaces: turns'
// PromptArg, spelled here so that the harness, which runs in the sandbox, does not import the
// control plane's turns (TestPromptArgIsTurns checks they agree).
const PromptArg = "{prompt}"

// KillGrace is how long the agent, and whatever it started, have to exit after the harness
// sends them SIGTERM (at a cancel, or when the agent has exited), before they get SIGKILL.
const KillGrace = 3 * time.Second

// Config is one turn.
type Config struct {
	// Argv is the agent's command line; each argument equal to PromptArg becomes Prompt.
	Argv   []string
	Prompt string
	// RunLog is the file the agent's stdout is appended to (created 0644 if missing; 0600 in
	// TurnDir).
	RunLog string
	// StatusFile is written once, atomically, when the agent has ended (0644; 0600 in
	// TurnDir).
	StatusFile string
	// TurnDir, when set, is the turn's directory, opened by OpenTurnDir: RunLog and StatusFile
	// are then names in it, opened and replaced through it without following a symlink, so
	// nothing that renames or swaps a part of its path redirects them.
	TurnDir *os.File
	// Split, when set, runs the agent as UID:GID with no supplementary groups. The harness
	// must be root then.
	Split      bool
	UID, GID   uint32
	Dir        string    // the agent's working directory; "": the harness's
	Env        []string  // the agent's environment; nil: the harness's own
	Stderr     io.Writer // where the agent's stderr goes besides the status's tail; nil: nowhere else
	StartLeave bool      // leave the parent's session (setsid) before starting: `hangar harness` sets it
	// Clock times the kill grace and the sweep, and stamps the status. Nil: the real clock.
	Clock quartz.Clock
	// Ready, when set, is closed once the harness catches SIGTERM and SIGINT and the run log
	// exists: from then on a cancel is passed on to the agent and the status file written, and
	// the log can be followed (`hangar harness --detach` waits for it before it answers).
	Ready *os.File
}

// Status is what the status file holds.
type Status struct {
	// ExitCode is the agent's exit code; -1 when a signal ended it or it never started.
	ExitCode   int            `json:"exit_code"`
	Signal     string         `json:"signal,omitempty"` // the signal that ended it (SIGTERM, ...)
	Error      string         `json:"error,omitempty"`  // why it could not run, for a person
	StartedAt  time.Time      `json:"started_at"`
	EndedAt    time.Time      `json:"ended_at"`
	DurationMS int64          `json:"duration_ms"`
	Summary    runlog.Summary `json:"summary"`
	// StderrTail is the end of what the agent wrote to its stderr (StderrTailBytes at most,
	// from a line's start where one starts within them, valid UTF-8): often the only account
	// of why an agent that failed did so.
	StderrTail string `json:"stderr_tail,omitempty"`
}

// Run runs the turn until the agent ends, writes the status file and returns the status.
// Cancelling ctx, or a SIGTERM/SIGINT to the harness, ends the turn early. Either way, before
// the status file is written, everything the agent started is gone: the harness is a child
// subreaper, and sends SIGTERM to each of its descendants (and, split, each process of the
// agent's uid), then SIGKILL KillGrace later, until none is left (see sweeper); the run log
// has every line the agent wrote. What the agent orphans is reaped as it dies, during the
// whole turn, so that no zombie holds one of the sandbox's pids until the end (reapOrphans).
// The error is non-nil only when the status file could not be written, or, split, when the
// agent could write where it goes (CheckPrivate): then nothing is written there and the agent
// never starts.
func Run(ctx context.Context, cfg Config) (Status, error) {
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	st := Status{ExitCode: -1, StartedAt: cfg.Clock.Now().UTC()}
	if cfg.Split && cfg.TurnDir != nil && cfg.UID == uint32(os.Geteuid()) {
		st.Error = fmt.Sprintf("the agent's uid %d is the harness's: it could write its turn's status", cfg.UID)
		return st, errors.New("split turn: " + st.Error)
	}
	if cfg.Split && cfg.TurnDir == nil {
		for _, f := range []string{cfg.RunLog, cfg.StatusFile} {
			if err := CheckPrivate(filepath.Dir(f), cfg.UID); err != nil {
				st.Error = err.Error()
				return st, fmt.Errorf("split turn: %w", err)
			}
		}
	}
	err := run(ctx, cfg, &st)
	if err != nil {
		st.Error = err.Error()
	}
	st.EndedAt = cfg.Clock.Now().UTC()
	st.DurationMS = st.EndedAt.Sub(st.StartedAt).Milliseconds()
	data, merr := json.Marshal(st)
	if merr != nil {
		return st, fmt.Errorf("encode status: %w", merr)
	}
	if werr := writeStatus(cfg, append(data, '\n')); werr != nil {
		return st, fmt.Errorf("write status file %s: %w", cfg.StatusFile, werr)
	}
	return st, nil
}

// writeStatus writes the status file atomically, in TurnDir when there is one.
func writeStatus(cfg Config, data []byte) error {
	if cfg.TurnDir != nil {
		return WriteTurnFile(cfg.TurnDir, cfg.StatusFile, data)
	}
	return renameio.WriteFile(cfg.StatusFile, data, 0o644)
}

// openRunLog opens the run log to append to it, in TurnDir when there is one.
func openRunLog(cfg Config) (*os.File, error) {
	if cfg.TurnDir != nil {
		return OpenTurnFileAppend(cfg.TurnDir, cfg.RunLog)
	}
	return os.OpenFile(cfg.RunLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

func run(ctx context.Context, cfg Config, st *Status) error {
	if len(cfg.Argv) == 0 {
		return errors.New("no agent command")
	}
	// Termination is caught from the start: one that comes before the agent has started is
	// passed on as soon as it has, and the status file is still written.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if cfg.StartLeave {
		// EPERM: already a process group leader (its starter made it one); it is then out of
		// its starter's group, which is what matters for surviving it.
		if _, err := unix.Setsid(); err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("leave the parent's session: %w", err)
		}
		signal.Ignore(syscall.SIGHUP)
	}
	log, err := openRunLog(cfg)
	if err != nil {
		return fmt.Errorf("open run log: %w", err)
	}
	defer log.Close()
	if cfg.Ready != nil {
		cfg.Ready.Close() // the run log exists: a follower can open it
	}

	// Orphans among the agent's descendants come to the harness, not to init, so that the
	// sweep at the end finds them; those that die before it are reaped at once (reapOrphans).
	// On a kernel without it (before 3.4) an orphan goes to init, out of the sweep's reach but
	// for the uid sweep: said on stderr, and the turn runs.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "hangar harness: become a child subreaper: %v\n", err)
	}

	cmd := command(cfg)
	// The agent writes into pipes of our own rather than ones os/exec copies from: their read
	// ends then stay ours to close when the agent has ended but something it left behind still
	// holds a write end.
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	defer pr.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		pw.Close()
		return fmt.Errorf("start agent: %w", err)
	}
	defer er.Close()
	cmd.Stdout, cmd.Stderr = pw, ew
	err = startNoNewPrivs(cmd)
	pw.Close()
	ew.Close()
	if err != nil {
		return fmt.Errorf("start agent %s: %w", cfg.Argv[0], err)
	}
	sw := sweeper{self: os.Getpid(), agent: cmd.Process.Pid, uids: uidSweep(cfg.Split), uid: cfg.UID, clock: cfg.Clock, grace: KillGrace}
	exited, copied := make(chan struct{}), make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stopReaping := reapOrphans(sw.agent, exited)
	defer stopReaping()
	tail := &tailWriter{out: cfg.Stderr}
	tailed := make(chan struct{})
	go func() {
		defer close(tailed)
		io.Copy(tail, er)
	}()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		awaitEnd(ctx, sigs, exited)
		select {
		case <-exited:
		default:
			// A cancel: the agent's process group gets SIGTERM at once, all of it together, as
			// a terminal's Ctrl-C does — signalled one by one, a shell could see its child die
			// and exit 0 before its own signal came. The sweep then ends the rest.
			unix.Kill(-sw.agent, unix.SIGTERM)
			unix.Kill(-sw.agent, unix.SIGCONT)
		}
		sw.end()
		closeOutput(cfg.Clock, copied, tailed, pr, er)
	}()
	copyErr := copyLines(log, pr, &st.Summary)
	close(copied)
	<-exited
	<-ended
	<-tailed
	st.StderrTail = tail.String()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = unix.SignalName(ws.Signal())
	} else {
		st.ExitCode = cmd.ProcessState.ExitCode()
	}
	if copyErr != nil {
		return fmt.Errorf("copy the agent's output to the run log: %w", copyErr)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return fmt.Errorf("wait for agent: %w", waitErr)
	}
	return nil
}

func command(cfg Config) *exec.Cmd {
	argv := make([]string, len(cfg.Argv))
	for i, a := range cfg.Argv {
		if a == PromptArg {
			a = cfg.Prompt
		}
		argv[i] = a
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stderr = cfg.Dir, cfg.Env, cfg.Stderr
	// The agent gets its own process group, so a cancel reaches everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cfg.Split {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: cfg.UID, Gid: cfg.GID, Groups: []uint32{}}
	}
	return cmd
}

// startNoNewPrivs starts cmd from a thread with no_new_privs set. The flag is per thread and
// inherited by a child, and os/exec forks from the calling goroutine's thread: so the goroutine
// is locked to its thread, and the thread is never handed back (it ends with the goroutine),
// keeping the flag from leaking into other goroutines' work.
func startNoNewPrivs(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("set no_new_privs: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// awaitEnd returns when the agent has exited, or when the turn is to end early: ctx's end, or
// a SIGTERM or SIGINT of the harness (a cancel).
func awaitEnd(ctx context.Context, sigs <-chan os.Signal, exited <-chan struct{}) {
	select {
	case <-exited:
	case <-ctx.Done():
	case <-sigs:
	}
}

// closeOutput closes the read ends of the agent's stdout and stderr if they are still open
// KillGrace after the sweep, which ends copying: only a process out of the sweep's reach (one
// it gave a write end to) can hold them then.
func closeOutput(clock quartz.Clock, copied, tailed <-chan struct{}, out, errOut *os.File) {
	t := clock.NewTimer(KillGrace, "harness", "close output")
	defer t.Stop()
	for copied != nil || tailed != nil {
		select {
		case <-copied:
			copied = nil
		case <-tailed:
			tailed = nil
		case <-t.C:
			out.Close()
			errOut.Close()
			return
		}
	}
}

// copyLines appends r to log a line at a time, classifying each line into sum. A line longer
// than the reader's buffer is written in pieces as it comes; a last line without a newline
// gets one.
func copyLines(log io.Writer, r io.Reader, sum *runlog.Summary) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		line  []byte // the current line's first runlog.MaxLineBytes+1 bytes, for the summary
		total int    // the current line's length so far
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if _, werr := log.Write(chunk); werr != nil {
				return werr
			}
			total += len(chunk)
			if room := runlog.MaxLineBytes + 1 - len(line); room > 0 {
				line = append(line, chunk[:min(room, len(chunk))]...)
			}
			if chunk[len(chunk)-1] == '\n' {
				if total <= runlog.MaxLineBytes+1 {
					line = line[:len(line)-1] // the whole line is kept: drop its newline
				} // else: more than MaxLineBytes kept, so Classify cuts and flags it
				sum.Add(runlog.Classify(line))
				line, total = line[:0], 0
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			if len(line) > 0 {
				if _, werr := log.Write([]byte{'\n'}); werr != nil {
					return werr
				}
				sum.Add(runlog.Classify(line))
			}
			return nil
		default:
			return err
		}
	}
}

// ParseStatus reads a status file's content.
func ParseStatus(data []byte) (Status, error) {
	var st Status
	if err := json.Unmarshal(data, &st); err != nil {
		return Status{}, fmt.Errorf("decode status file: %w", err)
	}
	return st, nil
}
