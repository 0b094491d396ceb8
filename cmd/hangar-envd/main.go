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
	"os/signal"
	"syscall"

	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// verb is one subcommand; run gets the arguments after the verb's name.
type verb struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func verbs() []verb {
	return []verb{
		{"envd", "run the daemon (E2B envd compatible)", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Envd(ctx, "hangar-envd envd", args, stdout, stderr)
		}},
		{"harness", "run one turn of an agent (started by hangar serve)", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Harness(ctx, "hangar-envd harness", args, stdout, stderr)
		}},
		{"tail", "follow a file as it is written, woken by inotify (the turn watcher runs it)", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Tail(ctx, "hangar-envd tail", args, stdout, stderr)
		}},
		// Other in-sandbox verbs go here, with their code in internal/sandboxcmd or a package
		// as free of the control plane as it is (see imports_test.go).
		{"version", "print hangar-envd's version", func(_ context.Context, args []string, stdout, _ io.Writer) error {
			if len(args) > 0 {
				return fmt.Errorf("version takes no arguments, not %q", args[0])
			}
			fmt.Fprintln(stdout, "hangar-envd", version)
			return nil
		}},
	}
}

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
			fmt.Fprintf(stderr, "hangar-envd %s: %v\n", v.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "hangar-envd: unknown command %q (run 'hangar-envd --help' for the list)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "hangar-envd: what hangar runs inside a sandbox.")
	fmt.Fprintln(w, "\nUsage: hangar-envd <command> [flags]\n\nCommands:")
	for _, v := range verbs() {
		fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
	}
	fmt.Fprintln(w, "\nRun 'hangar-envd <command> --help' for a command's flags.")
}
