package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
)

func (a *app) watchCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "watch SANDBOX PATH",
		Short: "print each change in a sandbox's directory as it happens",
		Long: `watch prints a line for each file created, written, removed, renamed or chmod-ed in PATH (a
directory, absolute or relative to the sandbox's workdir), until Ctrl-C. A dropped connection is
resumed after the last change seen.`,
		Example:           "  hangar watch demo .\n  hangar watch -r demo src -o json",
		Args:              exactArgs(2, "a sandbox's name and a directory"),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			q := url.Values{"path": {args[1]}}
			if recursive {
				q.Set("recursive", "true")
			}
			path := "/api/sandboxes/" + esc(args[0]) + "/watch?" + q.Encode()
			col := a.colour(a.cfg.Stdout)
			return a.followEvents(cmd.Context(), c, path, func(ev event) error {
				if ev.Name == "gap" {
					var g struct{ From, To int64 }
					json.Unmarshal(ev.Data, &g)
					fmt.Fprintf(a.cfg.Stderr, "hangar: changes %d to %d are no longer kept (hangar keeps the last 200).\n", g.From+1, g.To)
					return nil
				}
				if asJSON {
					fmt.Fprintf(a.cfg.Stdout, "%s\n", ev.Data)
					return nil
				}
				var ch wire.Change
				json.Unmarshal(ev.Data, &ch)
				ts := ""
				if t := time.Time(ch.TS); !t.IsZero() {
					ts = t.Local().Format("15:04:05.000")
				}
				fmt.Fprintf(a.cfg.Stdout, "%s  %-6s  %s\n", ts, paint(col, watchColour[ch.Type], ch.Type), ch.Name)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "watch every directory under PATH too")
	a.outputFlag(cmd)
	return cmd
}

var watchColour = map[string]string{"create": "32", "write": "34", "remove": "31", "rename": "33", "chmod": "90"}

// followEvents follows an SSE stream of plain messages numbered by id (a watch, a session's or a
// job's events), calling fn for each, until ctx ends or hangar closes the stream for good; a
// dropped connection is resumed after the last id (Last-Event-ID). ctx's end returns nil.
func (a *app) followEvents(ctx context.Context, c *client, path string, fn func(event) error) error {
	lastID := ""
	r := newReconnect(a.cfg.Stderr)
	for {
		sse, body, err := c.stream(ctx, "GET", path, nil, lastID)
		if err == nil {
			if r.warned {
				fmt.Fprintln(a.cfg.Stderr, "hangar: reconnected.")
				r.reset()
			}
			err = sse.each("lost the stream from hangar", func(ev event) error {
				if err := fn(ev); err != nil {
					return err
				}
				if ev.ID != "" {
					lastID = ev.ID
				}
				return nil
			})
			body.Close()
		}
		if again, err := r.wait(ctx, err); !again {
			return err
		}
	}
}

// reconnect paces the attempts to open a stream again after it broke: it says so once on its
// writer, then waits 250 ms before each attempt, doubling up to 5 s, until reset.
type reconnect struct {
	w       io.Writer
	backoff wait.Backoff
	warned  bool // the break was said and no stream has come back since
}

func newReconnect(w io.Writer) *reconnect {
	r := &reconnect{w: w}
	r.reset()
	return r
}

// wait reports whether to try again after err, once the pause is over: not when ctx has ended
// (nil), nor when err is a refusal rather than a break (err is returned).
func (r *reconnect) wait(ctx context.Context, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, nil
	}
	if !retriable(err) {
		return false, err
	}
	if !r.warned {
		fmt.Fprintf(r.w, "hangar: %v; reconnecting…\n", err)
		r.warned = true
	}
	select {
	case <-ctx.Done():
		return false, nil
	case <-time.After(r.backoff.Step()):
	}
	return true, nil
}

// reset starts the pacing afresh: the stream is back.
func (r *reconnect) reset() {
	r.warned = false
	r.backoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Second}
}
