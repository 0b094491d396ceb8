package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// shell is the command of `hangar exec -t SANDBOX` without one: a login shell.
const shell = wire.LoginShell

type execOptions struct {
	interactive, tty bool
	cwd              string
	env              map[string]string
	timeout          float64
}

func (a *app) execCmd() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [flags] SANDBOX -- COMMAND...",
		Short: "run a command in a sandbox, its output printed as it comes, and exit with its exit code",
		Long: `exec runs COMMAND in the sandbox and streams its standard output and error to this terminal's
as they print, then exits with the command's exit code. One argument is a shell command line
(run with bash -lc); several are quoted as they are, one word each. Ctrl-C ends the command.
Flags go before SANDBOX.

-i forwards standard input; -t runs the command on a terminal (raw mode here, resized with this
one); -t without a command opens a login shell. With -i or -t the command runs as a background
process whose output comes as one stream (standard error with standard output), and --env and
--timeout are not available.`,
		Example: "  hangar exec demo -- 'echo hi from $(pwd)'\n  hangar exec demo -- ls -la /tmp\n  echo hello | hangar exec -i demo -- cat\n  hangar exec -it demo",
		Args: func(cmd *cobra.Command, args []string) error {
			if o.tty && (len(args) == 1 || len(args) == 2 && args[1] == "--") {
				return nil
			}
			return a.commandArgs(cmd, args)
		},
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			line := commandLine(args[1:])
			if o.interactive || o.tty {
				if len(o.env) > 0 || o.timeout != 0 {
					return usageError{"--env and --timeout work only without -i and -t"}
				}
				if line == "" {
					line = shell
				}
				return a.execProcess(cmd.Context(), c, args[0], line, o)
			}
			return a.execStream(cmd.Context(), c, args[0], line, o)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVarP(&o.interactive, "interactive", "i", false, "forward standard input to the command")
	f.BoolVarP(&o.tty, "tty", "t", false, "run it on a terminal (standard input must be one)")
	f.StringVar(&o.cwd, "cwd", "", "where it runs (default: the sandbox's workdir)")
	f.StringToStringVar(&o.env, "env", nil, "environment to add, KEY=VALUE (repeat, or comma-separate)")
	f.Float64Var(&o.timeout, "timeout", 0, "seconds after which the command is killed (exit code 124)")
	return cmd
}

// commandArgs wants a sandbox and a command.
func (a *app) commandArgs(cmd *cobra.Command, args []string) error {
	if len(args) < 2 || (len(args) == 2 && args[1] == "--") {
		return usageError{fmt.Sprintf("%s takes a sandbox's name and a command: %s", cmd.CommandPath(), cmd.UseLine())}
	}
	return nil
}

// commandLine makes the shell command line of a command's arguments: one argument is a
// command line already; several are each quoted, so they reach the command as they are. A
// leading "--" (flags stop at the sandbox's name, so it is not taken away) is dropped.
func commandLine(args []string) string {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return ""
	}
	if len(args) == 1 {
		return args[0]
	}
	q := make([]string, len(args))
	for i, s := range args {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell, when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// execStream runs a command through exec/stream: stdout and stderr events to this process's
// stdout and stderr, then the result's exit code. Ending ctx (Ctrl-C) closes the request, and
// hangar kills a command whose client went away.
func (a *app) execStream(ctx context.Context, c *client, sandbox, line string, o execOptions) error {
	req := map[string]any{"command": line, "cwd": o.cwd, "env": o.env, "timeout": o.timeout}
	sse, body, err := c.stream(ctx, "POST", "/api/sandboxes/"+esc(sandbox)+"/exec/stream", req, "")
	if err != nil {
		return err
	}
	defer body.Close()
	for {
		ev, err := sse.next()
		if err != nil {
			if ctx.Err() != nil {
				return exitInterrupted
			}
			return errors.New("lost the connection to hangar before the command ended (hangar kills a command whose client went away)")
		}
		switch ev.Name {
		case "stdout", "stderr":
			b, err := outputBytes(ev.Data)
			if err != nil {
				return err
			}
			if ev.Name == "stdout" {
				a.cfg.Stdout.Write(b)
			} else {
				a.cfg.Stderr.Write(b)
			}
		case "capped":
			fmt.Fprintln(a.cfg.Stderr, "hangar: the output reached hangar's HANGAR_STREAM_MAX_BYTES; nothing more is shown, and the command runs on to its end.")
		case "error":
			var e apiError
			json.Unmarshal(ev.Data, &e)
			return &e
		case "result":
			var r wire.ExecResult
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				return fmt.Errorf("read the command's result: %w", err)
			}
			if !r.Streamed {
				// Without a daemon the output comes only here, in one piece at the end.
				a.cfg.Stdout.Write(decoded(r.Stdout, r.StdoutEncoding))
				a.cfg.Stderr.Write(decoded(r.Stderr, r.StderrEncoding))
			}
			if r.Closed != "" && r.ExitCode == nil {
				if why, ok := closeReasons[r.Closed]; ok {
					return fmt.Errorf("the command's stream ended before it did: %s", why)
				}
				return fmt.Errorf("the command's stream ended before it did (%s): %s", r.Closed, r.Status)
			}
			return a.exitOf(r.ExitCode, r.Status, r.TimedOut)
		}
	}
}

// decoded is s, or the bytes it carries when encoding is base64.
func decoded(s, encoding string) []byte {
	if encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(s)
}

// execProcess runs a command as a background process (on a terminal with -t), forwards this
// process's standard input to it, follows its output, and exits with its exit code. Ending ctx
// (Ctrl-C, or SIGTERM) kills it, as a closed exec stream would.
func (a *app) execProcess(ctx context.Context, c *client, sandbox, line string, o execOptions) error {
	req := map[string]any{"command": line, "cwd": o.cwd}
	var restore func()
	if o.tty {
		in, ok := a.stdinFile()
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return usageError{"-t needs standard input to be a terminal; use -i alone to forward a pipe"}
		}
		cols, rows, ok := termSize(in)
		if !ok {
			cols, rows = 80, 24
		}
		req["pty"] = map[string]int{"cols": cols, "rows": rows}
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		restore = func() { term.Restore(int(in.Fd()), state) }
		defer restore()
	}
	var p wire.Process
	if err := c.do(ctx, "POST", procPath(sandbox, ""), req, &p); err != nil {
		return err
	}
	inputCtx, stopInput := context.WithCancel(ctx)
	defer stopInput()
	if o.tty {
		go a.forwardResizes(inputCtx, c, sandbox, p.ID)
	}
	go a.forwardInput(inputCtx, c, sandbox, p.ID, !o.tty)
	end, err := a.follow(ctx, c, sandbox, p.ID, 0, a.cfg.Stdout)
	if ctx.Err() != nil {
		// Interrupted: end the command, as hangar ends one whose exec stream closed.
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.do(kctx, "DELETE", procPath(sandbox, p.ID), nil, nil)
		return exitInterrupted
	}
	if err != nil {
		return err
	}
	if restore != nil {
		restore()
	}
	return a.exitOf(end.ExitCode, end.Status, false)
}

// forwardInput sends what this process reads on stdin to the process id, in order; at the end
// of stdin it closes the process's (when eof), and it stops at ctx's end or a refused write
// (the process ended). A read it is blocked in at the end is left: the program exits.
func (a *app) forwardInput(ctx context.Context, c *client, sandbox, id string, eof bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := a.cfg.Stdin.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if n > 0 {
			in := map[string]any{"input": base64.StdEncoding.EncodeToString(buf[:n]), "base64": true}
			if c.do(ctx, "POST", procPath(sandbox, id)+"/input", in, nil) != nil {
				return
			}
		}
		if err != nil {
			if eof {
				c.do(ctx, "POST", procPath(sandbox, id)+"/input", map[string]any{"input": "", "eof": true}, nil)
			}
			return
		}
	}
}

// forwardResizes tells hangar the terminal's new size each time it changes (SIGWINCH).
func (a *app) forwardResizes(ctx context.Context, c *client, sandbox, id string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	in, _ := a.stdinFile()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			cols, rows, ok := termSize(in)
			if !ok {
				continue
			}
			c.do(ctx, "POST", procPath(sandbox, id)+"/resize", map[string]int{"cols": cols, "rows": rows}, nil)
		}
	}
}

// termSize is the size of terminal f; ok is false when it has none to tell (a serial console,
// or a terminal under `script`, says 0 by 0), and a remote terminal cannot be that small.
func termSize(f *os.File) (cols, rows int, ok bool) {
	cols, rows, err := term.GetSize(int(f.Fd()))
	return cols, rows, err == nil && cols > 0 && rows > 0
}
