// Command hangar is the control plane (serve) and its command-line client (sandbox, exec,
// attach, ...: internal/cli). It also carries the verbs of hangar-envd, the in-sandbox binary
// (envd, the daemon; harness, one turn of an agent), for development.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hangar-dev/hangar/internal/cli"
	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

// A verb is one of hangar's server and in-sandbox verbs, added to the client's cobra root as a
// command that parses its own flags (internal/settings). Run returns flag.ErrHelp when --help
// was asked for, and a sandboxcmd.ExitCode to exit with that code and say nothing more.
type verb struct {
	Name, Summary string
	Run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// verbs are hangar's server and in-sandbox verbs. A new one plugs in with one line here. The
// client verbs are internal/cli's.
func verbs() []verb {
	return []verb{
		{Name: "serve", Summary: "run the control plane: REST, MCP, /metrics on one listener", Run: runServe},
		// hangar-envd's verbs, here too for development: sandboxes run hangar-envd's.
		inSandbox("envd", "run the in-sandbox daemon (E2B envd compatible), as hangar-envd does", sandboxcmd.Envd),
		inSandbox("harness", "run one turn of an agent in a sandbox (started by serve), as hangar-envd does", sandboxcmd.Harness),
		inSandbox("tail", "follow a file as it is written, woken by inotify (serve's turn watcher runs it), as hangar-envd does", sandboxcmd.Tail),
		inSandbox("turn-dir", "make, write and read a turn's directory, checked on every use (serve runs it), as hangar-envd does", sandboxcmd.TurnDir),
		inSandbox("turn-poll", "read a turn's status file and its run log in one start (serve's turn watcher runs it), as hangar-envd does", sandboxcmd.TurnPoll),
		inSandbox("install", "copy this binary to DEST (the Kubernetes provider's init container runs it)", sandboxcmd.Install),
		{Name: "version", Summary: "print hangar's version", Run: runVersion},
		{Name: "admin-token", Summary: "print the first admin token serve made (<data dir>/admin-token), for an image with no shell", Run: runAdminToken},
		{Name: "health", Summary: "exit 0 if the hangar serving on this machine is ready (GET /readyz), 1 if not: the image's HEALTHCHECK", Run: runHealth},
	}
}

// inSandbox is the verb name of package sandboxcmd, whose help calls it "hangar <name>".
func inSandbox(name, summary string, run func(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error) verb {
	return verb{Name: name, Summary: summary, Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return run(ctx, "hangar "+name, args, stdout, stderr)
	}}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := sandboxcmd.NotifyContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs hangar with args and returns its exit code: a client verb's (internal/cli), or one
// of verbs(): 0, the verb's sandboxcmd.ExitCode, or 1 with its error on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := cli.NewRoot(cli.Config{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv,
		About: "hangar: sandboxes for AI agents, with their work streamed as it happens."})
	for _, v := range verbs() {
		cli.AddVerb(root, v.Name, v.Summary, func(ctx context.Context, args []string) error {
			err := v.Run(ctx, args, stdout, stderr)
			var code sandboxcmd.ExitCode
			switch {
			case errors.As(err, &code):
				return cli.ExitCode(code)
			case errors.Is(err, flag.ErrHelp):
				return nil
			case err != nil:
				// The server verbs' own form, as hangar-envd says it: "hangar serve: ...".
				fmt.Fprintf(stderr, "hangar %s: %v\n", v.Name, err)
				return cli.ExitCode(1)
			}
			return nil
		})
	}
	return cli.Execute(ctx, root, args)
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hangar version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "hangar", version)
	return nil
}
