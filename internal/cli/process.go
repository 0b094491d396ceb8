package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
)

func procPath(sandbox, id string) string {
	p := "/api/sandboxes/" + esc(sandbox) + "/processes"
	if id != "" {
		p += "/" + esc(id)
	}
	return p
}

func (a *app) psCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "ps SANDBOX",
		Short:             "list a sandbox's background processes (running, and ended in the last 10 minutes)",
		Args:              exactArgs(1, "a sandbox's name"),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			col, now := a.colour(a.cfg.Stdout), time.Now()
			header := []string{"ID", "STATE", "EXIT", "STARTED", "USER", "COMMAND"}
			return printList(cmd.Context(), a, procPath(args[0], ""), "processes", header, func(p wire.Process) []string {
				exit := ""
				if p.ExitCode != nil {
					exit = strconv.Itoa(*p.ExitCode)
				}
				state := p.State
				if p.State == "exited" && p.ExitCode != nil && *p.ExitCode != 0 {
					state = "exited " + exit
				}
				return []string{p.ID, paint(col, stateColour(state), p.State), exit, ago(time.Time(p.StartedAt), now), p.User, oneLine(p.Command, 60)}
			})
		},
	}
	a.outputFlag(cmd)
	return cmd
}

func (a *app) startCmd() *cobra.Command {
	var cwd string
	cmd := &cobra.Command{
		Use:   "start [flags] SANDBOX -- COMMAND...",
		Short: "start a background process and print its id",
		Long: `start starts COMMAND in the sandbox as a background process and prints its id at once;
follow it with hangar attach, list it with hangar ps, end it with hangar kill. One argument is a
shell command line; several are quoted as they are, one word each.`,
		Example:           "  ID=$(hangar start demo -- 'for i in $(seq 1 5); do echo $i; sleep 1; done')\n  hangar attach demo $ID",
		Args:              a.commandArgs,
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"command": commandLine(args[1:]), "cwd": cwd}
			return printAnswer(cmd.Context(), a, "POST", procPath(args[0], ""), body, func(p wire.Process) {
				fmt.Fprintln(a.cfg.Stdout, p.ID)
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&cwd, "cwd", "", "where it runs (default: the sandbox's workdir)")
	a.outputFlag(cmd)
	return cmd
}

func (a *app) killCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "kill SANDBOX ID",
		Short:             "end a background process: SIGTERM to its process group, SIGKILL 3 s later",
		Args:              exactArgs(2, "a sandbox's name and a process id"),
		ValidArgsFunction: a.completeProcess,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printAnswer(cmd.Context(), a, "DELETE", procPath(args[0], args[1]), nil, func(p wire.Process) {
				if p.State == "running" {
					fmt.Fprintf(a.cfg.Stdout, "Killing %s (SIGTERM, then SIGKILL 3 s later).\n", p.ID)
				} else {
					fmt.Fprintf(a.cfg.Stdout, "%s has already ended: %s.\n", p.ID, p.Status)
				}
			})
		},
	}
	a.outputFlag(cmd)
	return cmd
}

func (a *app) attachCmd() *cobra.Command {
	var since string
	var tail int
	cmd := &cobra.Command{
		Use:   "attach SANDBOX ID",
		Short: "print a background process's kept output, then follow it until it ends",
		Long: `attach prints what hangar keeps of the process's output (its last 256 KiB), then follows it
live, and exits with its exit code when it ends. --tail N prints only the last N lines kept
(0: none), as docker logs --tail does; --since 10m starts with what it printed in the last 10
minutes (to within a second), as kubectl logs --since does; --since N starts at byte offset N,
the id of the last output event you saw or a read's next, so nothing is printed twice. A dropped connection is
resumed where it stopped (Last-Event-ID), nothing lost or repeated; if hangar itself restarted,
what the process printed while hangar was down is lost, and attach says so. Ctrl-C detaches: the
process runs on.`,
		Example:           "  hangar attach demo p_65e945bfdbbd\n  hangar attach --tail 20 demo p_65e945bfdbbd",
		Args:              exactArgs(2, "a sandbox's name and a process id"),
		ValidArgsFunction: a.completeProcess,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			from, err := attachFrom(cmd.Context(), c, args[0], args[1], since, tail)
			if err != nil {
				return err
			}
			end, err := a.follow(cmd.Context(), c, args[0], args[1], from, a.cfg.Stdout)
			if err != nil {
				return err
			}
			return a.exitOf(end.ExitCode, end.Status, false)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "start at this byte offset (an output event's id, a read's next), or with what was printed in this last while (10m)")
	cmd.Flags().IntVar(&tail, "tail", -1, "print only the last N lines kept, then follow (0: only what comes next)")
	cmd.Flags().Lookup("tail").DefValue = "all"
	return cmd
}

// attachFrom is the offset attach starts at: since's (a byte offset, or a duration: where what
// the process printed in it starts), else where the last tail lines kept start (tail < 0: the
// oldest offset kept, 0).
func attachFrom(ctx context.Context, c *client, sandbox, id, since string, tail int) (int64, error) {
	if since != "" && tail >= 0 {
		return 0, usageError{"--since and --tail do not go together: give one"}
	}
	if n, err := strconv.ParseInt(since, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	query := ""
	switch {
	case since != "":
		d, err := time.ParseDuration(since)
		if err != nil || d < 0 {
			return 0, usageError{fmt.Sprintf("--since must be a byte offset (a whole number, 0 or more, as an output event's id or a read's next gives it) or a duration (10m, 1h30m), not %q", since)}
		}
		query = "?since_seconds=" + strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
	case tail < 0:
		return 0, nil
	}
	var kept wire.ProcessOutput
	if err := c.do(ctx, "GET", procPath(sandbox, id)+query, nil, &kept); err != nil {
		return 0, err
	}
	data := []byte(kept.Output)
	if kept.Encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(kept.Output); err != nil {
			return 0, fmt.Errorf("read the process's kept output: %w", err)
		}
	}
	start := kept.Next - int64(len(data))
	if since != "" {
		return start, nil
	}
	return start + int64(tailStart(data, tail)), nil
}

// tailStart is where data's last n lines start; a last line without its newline counts as one.
func tailStart(data []byte, n int) int {
	if n == 0 {
		return len(data)
	}
	end := len(bytes.TrimSuffix(data, []byte("\n")))
	for ; n > 0; n-- {
		if end = bytes.LastIndexByte(data[:end], '\n'); end < 0 {
			return 0
		}
	}
	return end + 1
}

// follow writes a process's output to w from offset since until it ends, and returns how it
// ended. It reconnects after a broken stream or a restarted hangar, resuming at the offset it
// reached (Last-Event-ID).
func (a *app) follow(ctx context.Context, c *client, sandbox, id string, since int64, w io.Writer) (wire.Process, error) {
	var info wire.Process
	if err := c.do(ctx, "GET", procPath(sandbox, id), nil, &struct {
		Process *wire.Process `json:"process"`
	}{&info}); err != nil {
		return info, err
	}
	adopted, next := info.Adopted, since
	r := newReconnect(a.cfg.Stderr)
	for {
		sse, body, err := c.stream(ctx, "GET", procPath(sandbox, id)+"/stream", nil, strconv.FormatInt(next, 10))
		if err == nil {
			var end *wire.Process
			end, err = a.pumpProcess(sse, w, &next)
			body.Close()
			if end != nil {
				return *end, nil
			}
		}
		// Wait until hangar answers for the process again: a refusal ends following.
		for {
			if again, err := r.wait(ctx, err); !again {
				return info, cmp.Or(err, ctx.Err())
			}
			var now wire.Process
			err = c.do(ctx, "GET", procPath(sandbox, id), nil, &struct {
				Process *wire.Process `json:"process"`
			}{&now})
			if err != nil {
				continue
			}
			// A restarted hangar adopts the process with its offsets past every old one (a
			// hangar before 00009 started them from 0 again): what lies between is lost, and
			// the new output starts at output_start.
			if (now.Adopted && !adopted) || now.OutputEnd < next {
				fmt.Fprintln(a.cfg.Stderr, "hangar: hangar restarted and took the process up again; what it printed while hangar was down is lost.")
				next, adopted = now.OutputStart, true
			}
			break
		}
		if r.warned {
			fmt.Fprintln(a.cfg.Stderr, "hangar: reconnected.")
			r.reset()
		}
	}
}

// streamBroke is a stream that ended before its end event: worth resuming.
type streamBroke struct{ why string }

func (e streamBroke) Error() string { return e.why }

// retriable says whether following may go on after err: hangar unreachable or restarting, or
// the stream broken; not a refusal (404, 401, ...).
func retriable(err error) bool {
	var re *reachErr
	var sb streamBroke
	var ae *apiError
	switch {
	case errors.As(err, &re), errors.As(err, &sb):
		return true
	case errors.As(err, &ae):
		return ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout
	}
	return false
}

// closeReasons say in words why hangar closed a stream it will not serve again.
var closeReasons = map[string]string{
	"destroyed": "the sandbox was destroyed",
	"paused":    "the sandbox was paused; resume it and attach again",
	"failed":    "the sandbox failed (its daemon or container died); hangar sandbox ls says why",
	"revoked":   "the token was revoked or expired; run hangar login with a valid one",
	"limit":     "this token has too many streams open; close one first",
	"error":     "hangar's stream from the sandbox broke",
}

// closeError is a close event's reason as an error: shutdown, lifetime and slow may be resumed.
func closeError(data []byte) error {
	var c wire.Close
	json.Unmarshal(data, &c)
	switch c.Reason {
	case "shutdown", "lifetime", "slow":
		return streamBroke{"hangar closed the stream (" + c.Reason + ")"}
	}
	if why, ok := closeReasons[c.Reason]; ok {
		return errors.New("the stream ended: " + why)
	}
	return fmt.Errorf("the stream ended (%s)", c.Reason)
}

// pumpProcess writes a process stream's output to w, moving *next past it, until the end
// event (returned) or the stream's end (an error).
func (a *app) pumpProcess(sse *sseReader, w io.Writer, next *int64) (*wire.Process, error) {
	for {
		ev, err := sse.next()
		if err != nil {
			return nil, streamBroke{"lost the stream from hangar"}
		}
		switch ev.Name {
		case "output":
			b, err := outputBytes(ev.Data)
			if err != nil {
				return nil, err
			}
			w.Write(b)
			if n, err := strconv.ParseInt(ev.ID, 10, 64); err == nil {
				*next = n
			}
		case "gap":
			var g wire.Gap
			json.Unmarshal(ev.Data, &g)
			if g.Lost != "" {
				fmt.Fprintf(a.cfg.Stderr, "hangar: output is gone: %s; going on after it.\n", g.Lost)
			} else {
				fmt.Fprintf(a.cfg.Stderr, "hangar: %d bytes of output are no longer kept (hangar keeps the last 256 KiB); going on after them.\n", g.To-g.From)
			}
			*next = g.To
		case "end":
			var end wire.Process
			if err := json.Unmarshal(ev.Data, &end); err != nil {
				return nil, fmt.Errorf("read the process's end: %w", err)
			}
			return &end, nil
		case "close":
			return nil, closeError(ev.Data)
		}
	}
}

// outputBytes decodes an output event's data: {"data": text} or {"data": base64, "encoding":
// "base64"}.
func outputBytes(data []byte) ([]byte, error) {
	var o wire.Output
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("read an output event: %w", err)
	}
	if o.Encoding == "base64" {
		return base64.StdEncoding.DecodeString(o.Data)
	}
	return []byte(o.Data), nil
}

// exitOf is how hangar exits after a command ended with code and status: its exit code; 124
// after a timeout (as timeout(1) does); 1, saying why, when there is no code.
func (a *app) exitOf(code *int, status string, timedOut bool) error {
	switch {
	case code == nil:
		return fmt.Errorf("the command ended without an exit code: %s", status)
	case timedOut:
		fmt.Fprintf(a.cfg.Stderr, "hangar: %s\n", status)
		return ExitCode(124)
	case *code == -1:
		fmt.Fprintf(a.cfg.Stderr, "hangar: %s\n", status)
		return ExitCode(1)
	case *code != 0:
		return ExitCode(*code)
	}
	return nil
}
