package sandboxcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/harness"
	"github.com/hangar-dev/hangar/internal/settings"
)

const harnessSummary = `Runs one turn of an agent: hangar harness [flags] -- AGENT [ARG...]
Sets no_new_privs, leaves its parent's session (the turn outlives whoever started it), runs the
agent with every argument "{prompt}" replaced by the prompt, appends the agent's stdout to the run
log line by line, and, once the agent has exited (or the harness got SIGTERM or SIGINT) and
everything it started has been ended (SIGTERM, then SIGKILL 3 s later), writes the status file
(exit code, signal, duration, summary, the tail of the agent's stderr).
The agent gets the harness's environment. With --detach (first), the turn starts in a new session
and the command exits at once, printing the turn's pid (its process group) and its start time
(/proc/<pid>/stat starttime); the turn's own errors go to harness.err beside the status file.
With --turn-dir (what hangar serve gives, a directory turn-dir make made), the prompt, run log,
status file and harness.err are in it, opened through it without following a symlink, and the
directory is checked as turn-dir checks it. With --split-uid, the run log's and status file's
directories must be out of the agent's reach (not its own, not writable by group or others, nor
any directory above them unless sticky). The harness exits with the agent's exit code (128+N
after signal N). Its settings are flags only: its environment is the agent's.`

// Harness runs one turn (`hangar-envd harness`, `hangar harness`); cmd is how help names the
// command. It returns an ExitCode when the agent did not exit 0.
func Harness(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	// Its environment is the agent's, with the session's secrets; its memory holds the prompt.
	if err := hideMemory(); err != nil {
		return err
	}
	var agent []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, agent = args[:i], args[i+1:]
	}
	var runLog, statusFile, prompt, promptFile, dir, turnDir string
	uid, gid := -1, -1
	// --detach is taken out before the settings are parsed (they all take a value).
	detach := slices.Contains(args, "--detach")
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--detach" })
	ss := []settings.Setting{
		{Name: "turn-dir", Arg: "DIR", Usage: "the turn's directory, made by turn-dir make: the prompt, run log, status file and harness.err are in it, each opened without following a symlink, the directory checked (turn-dir's rules) instead of the three flags below", Value: settings.String{P: &turnDir}},
		{Name: "run-log", Arg: "FILE", Usage: "the run log: the agent's stdout is appended to it", Value: settings.String{P: &runLog, Check: settings.NonEmpty}},
		{Name: "status-file", Arg: "FILE", Usage: "written atomically when the agent has ended", Value: settings.String{P: &statusFile, Check: settings.NonEmpty}},
		{Name: "prompt", Arg: "TEXT", Usage: "the prompt", Value: settings.String{P: &prompt}},
		{Name: "prompt-file", Arg: "FILE", Usage: "read the prompt from this file (instead of --prompt)", Value: settings.String{P: &promptFile}},
		{Name: "dir", Arg: "DIR", Usage: "the agent's working directory; none: the harness's", Value: settings.String{P: &dir}},
		{Name: "split-uid", Arg: "UID", Usage: "run the agent as this uid (the harness must be root); the run log and status file's directory must not be writable by it", Value: settings.Int{P: &uid, Max: math.MaxInt32}},
		{Name: "split-gid", Arg: "GID", Usage: "the agent's gid with --split-uid", Value: settings.Int{P: &gid, Max: math.MaxInt32}},
	}
	if err := settings.Parse(cmd, harnessSummary, "HANGAR_HARNESS_", ss, args, settings.NoEnv, stdout); err != nil {
		return err
	}
	switch {
	case turnDir != "" && (runLog != "" || statusFile != "" || promptFile != "" || prompt != ""):
		return errors.New("--turn-dir holds the run log, status file and prompt: give none of them with it")
	case turnDir == "" && (runLog == "" || statusFile == ""):
		return errors.New("--turn-dir, or --run-log and --status-file, are required")
	case len(agent) == 0:
		return errors.New("no agent command: give it after --")
	case (uid >= 0) != (gid >= 0):
		return errors.New("--split-uid and --split-gid go together")
	case prompt != "" && promptFile != "":
		return errors.New("give --prompt or --prompt-file, not both")
	}
	if turnDir != "" {
		// Checked before anything is written there; the detached turn opens it again.
		d, err := harness.OpenTurnDir(turnDir)
		if err != nil {
			return fmt.Errorf("turn: %w", err)
		}
		d.Close()
	}
	if uid >= 0 && turnDir == "" {
		// Checked before anything is written there (the detached turn checks again).
		for _, f := range []string{runLog, statusFile} {
			if err := harness.CheckPrivate(filepath.Dir(f), uint32(uid)); err != nil {
				return fmt.Errorf("split turn: %w", err)
			}
		}
	}
	if detach {
		return detachHarness(args, agent, turnDir, statusFile, stdout)
	}
	var td *os.File
	if turnDir != "" {
		var err error
		if td, err = harness.OpenTurnDir(turnDir); err != nil {
			return fmt.Errorf("turn: %w", err)
		}
		defer td.Close()
		var b strings.Builder
		if err := harness.ReadTurnFile(td, harness.PromptFile, 0, -1, &b); err != nil {
			return fmt.Errorf("read the prompt: %w", err)
		}
		prompt, runLog, statusFile = b.String(), harness.RunLogFile, harness.StatusFile
	}
	if promptFile != "" {
		b, err := os.ReadFile(promptFile)
		if err != nil {
			return fmt.Errorf("read --prompt-file: %w", err)
		}
		prompt = string(b)
	}
	// The harness handles SIGTERM and SIGINT itself (passing them to the agent and waiting for
	// it): the verb's context, which they end, must not end the turn early.
	cfg := harness.Config{
		Argv: agent, Prompt: prompt, RunLog: runLog, StatusFile: statusFile, TurnDir: td, Dir: dir,
		Split: uid >= 0, UID: uint32(uid), GID: uint32(gid), Stderr: stderr, StartLeave: true,
	}
	if os.Getenv(readyFDEnv) == "3" {
		os.Unsetenv(readyFDEnv) // not the agent's
		cfg.Ready = os.NewFile(3, "ready")
	}
	st, err := harness.Run(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	if st.Error != "" {
		return errors.New(st.Error)
	}
	if st.Signal != "" {
		return ExitCode(128 + int(unix.SignalNum(st.Signal)))
	}
	if st.ExitCode != 0 {
		return ExitCode(st.ExitCode)
	}
	return nil
}

// ExitCode is an error that makes the program exit with that code and say nothing more (the
// harness mirrors its agent's exit code).
type ExitCode int

func (c ExitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// readyFDEnv tells a detached harness that fd 3 is its ready pipe.
const readyFDEnv = "HANGAR_HARNESS_READY_FD"

// detachHarness starts this same harness again without --detach, in a new session (so it is
// its own process group's leader and outlives whoever ran this), and prints its pid.
func detachHarness(args, agent []string, turnDir, statusFile string, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable: %w", err)
	}
	errFile, err := openHarnessErr(turnDir, statusFile)
	if err != nil {
		return fmt.Errorf("open harness.err: %w", err)
	}
	defer errFile.Close()
	cmd := exec.Command(exe, append(append(append([]string{"harness"}, args...), "--"), agent...)...)
	cmd.Stderr = errFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The turn closes fd 3 once it catches SIGTERM: only then is its pid given out, so a
	// cancel that comes at once still ends it with a status file.
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start harness: %w", err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("start harness: %w", err)
	}
	if _, err := ready.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		return fmt.Errorf("wait for the harness to start: %v", err)
	}
	// The turn is alive (it waits for nothing from here): its start time can be read.
	start, err := harness.ProcStart(cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, cmd.Process.Pid, start)
	return cmd.Process.Release()
}

// openHarnessErr opens harness.err, in the turn's directory or beside the status file, to
// append to it.
func openHarnessErr(turnDir, statusFile string) (*os.File, error) {
	if turnDir == "" {
		return os.OpenFile(filepath.Join(filepath.Dir(statusFile), harness.HarnessErr), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	d, err := harness.OpenTurnDir(turnDir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return harness.OpenTurnFileAppend(d, harness.HarnessErr)
}
