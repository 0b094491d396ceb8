// Command hangar-envd is what runs inside a sandbox: the daemon (envd, wire-compatible with
// E2B's envd) and the turn harness (harness). Every provider places this binary, not hangar,
// in its sandboxes: it carries only the daemon's packages, so it is small to copy and cheap
// to keep running (docs/envd.md gives its footprint). cmd/hangar carries the same verbs for
// development.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const (
	program = "hangar-envd"
	about   = "hangar-envd: what hangar runs inside a sandbox."
)

// A verb is one subcommand. Run gets the arguments after the verb's name and the process's
// standard streams; it returns flag.ErrHelp when --help was asked for, and a
// sandboxcmd.ExitCode to exit with that code and say nothing more.
type verb struct {
	Name, Summary string
	Run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func verbs() []verb {
	return []verb{
		inSandbox("envd", "run the daemon (E2B envd compatible)", sandboxcmd.Envd),
		inSandbox("harness", "run one turn of an agent (started by hangar serve)", sandboxcmd.Harness),
		inSandbox("tail", "follow a file as it is written, woken by inotify (the turn watcher runs it)", sandboxcmd.Tail),
		inSandbox("turn-dir", "make, write and read a turn's directory, checked on every use (hangar serve runs it)", sandboxcmd.TurnDir),
		inSandbox("turn-poll", "read a turn's status file and its run log in one start (hangar serve's turn watcher runs it)", sandboxcmd.TurnPoll),
		inSandbox("install", "copy this binary to DEST (the Kubernetes provider's init container runs it)", sandboxcmd.Install),
		// Other in-sandbox verbs go here, with their code in internal/sandboxcmd or a package
		// as free of the control plane as it is (see imports_test.go).
		{Name: "version", Summary: "print hangar-envd's version", Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			if len(args) > 0 {
				return fmt.Errorf("version takes no arguments, not %q", args[0])
			}
			fmt.Fprintln(stdout, program, version)
			return nil
		}},
	}
}

// inSandbox is the verb name of package sandboxcmd, whose help calls it "hangar-envd <name>".
func inSandbox(name, summary string, run func(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error) verb {
	return verb{Name: name, Summary: summary, Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return run(ctx, program+" "+name, args, stdout, stderr)
	}}
}

func main() {
	ctx, stop := sandboxcmd.NotifyContext(context.Background())
	code := run(ctx, verbs(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the verb args[0] and returns the exit code: 0, the verb's sandboxcmd.ExitCode, 1
// with the error on stderr, or 2 for no verb or an unknown one (which is how the control plane
// tells a hangar-envd older than a verb it asks for).
func run(ctx context.Context, verbs []verb, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, verbs)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, v := range verbs {
		if v.Name == args[0] {
			return exitCode(v.Run(ctx, args[1:], stdout, stderr), v.Name, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (run '%s --help' for the list)\n", program, args[0], program)
	return 2
}

// exitCode is the exit code of verb name that returned err, which it says on stderr when it
// is a failure with no code of its own.
func exitCode(err error, name string, stderr io.Writer) int {
	var code sandboxcmd.ExitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", program, name, err)
	return 1
}

func usage(w io.Writer, verbs []verb) {
	fmt.Fprintln(w, about)
	fmt.Fprintf(w, "\nUsage: %s <command> [flags]\n\nCommands:\n", program)
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-8s %s\n", v.Name, v.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n", program)
}
