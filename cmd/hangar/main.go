// Command hangar is the control plane (serve). It also carries the verbs of hangar-envd, the
// in-sandbox binary (envd, the daemon; harness, one turn of an agent), for development.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

// verb is one subcommand. run gets the arguments after the verb's name and the process's
// standard streams; it returns flag.ErrHelp when --help was asked for.
type verb struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func verbs() []verb {
	return []verb{
		{"serve", "run the control plane: REST, MCP, /metrics on one listener", runServe},
		// hangar-envd's verbs, here too for development: sandboxes run hangar-envd's.
		{"envd", "run the in-sandbox daemon (E2B envd compatible), as hangar-envd does", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Envd(ctx, "hangar envd", args, stdout, stderr)
		}},
		{"harness", "run one turn of an agent in a sandbox (started by serve), as hangar-envd does", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Harness(ctx, "hangar harness", args, stdout, stderr)
		}},
		{"tail", "follow a file as it is written, woken by inotify (serve's turn watcher runs it), as hangar-envd does", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Tail(ctx, "hangar tail", args, stdout, stderr)
		}},
		{"version", "print hangar's version", runVersion},
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, v := range verbs() {
		if v.name != args[0] {
			continue
		}
		err := v.run(ctx, args[1:], stdout, stderr)
		var code sandboxcmd.ExitCode
		switch {
		case err == nil:
			return 0
		case errors.As(err, &code):
			return int(code)
		case errors.Is(err, flag.ErrHelp):
			return 0
		default:
			fmt.Fprintf(stderr, "hangar %s: %v\n", v.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "hangar: unknown command %q (run 'hangar --help' for the list)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "hangar: sandboxes for AI agents, with their work streamed as it happens.")
	fmt.Fprintln(w, "\nUsage: hangar <command> [flags]\n\nCommands:")
	for _, v := range verbs() {
		fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
	}
	fmt.Fprintln(w, "\nRun 'hangar <command> --help' for a command's flags.")
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
