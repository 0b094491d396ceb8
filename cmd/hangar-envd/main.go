// Command hangar-envd is what runs inside a sandbox: the daemon (envd, wire-compatible with
// E2B's envd) and the turn harness (harness). Every provider places this binary, not hangar,
// in its sandboxes: it carries only the daemon's packages, so it is small to copy and cheap
// to keep running (docs/envd.md gives its footprint). cmd/hangar carries the same verbs for
// development.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hangar-dev/hangar/internal/sandboxcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func verbs() []sandboxcmd.Verb {
	return []sandboxcmd.Verb{
		{Name: "envd", Summary: "run the daemon (E2B envd compatible)", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Envd(ctx, "hangar-envd envd", args, stdout, stderr)
		}},
		{Name: "harness", Summary: "run one turn of an agent (started by hangar serve)", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Harness(ctx, "hangar-envd harness", args, stdout, stderr)
		}},
		{Name: "tail", Summary: "follow a file as it is written, woken by inotify (the turn watcher runs it)", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.Tail(ctx, "hangar-envd tail", args, stdout, stderr)
		}},
		{Name: "turn-dir", Summary: "make, write and read a turn's directory, checked on every use (hangar serve runs it)", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return sandboxcmd.TurnDir(ctx, "hangar-envd turn-dir", args, stdout, stderr)
		}},
		sandboxcmd.InstallVerb("hangar-envd"),
		// Other in-sandbox verbs go here, with their code in internal/sandboxcmd or a package
		// as free of the control plane as it is (see imports_test.go).
		{Name: "version", Summary: "print hangar-envd's version", Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			if len(args) > 0 {
				return fmt.Errorf("version takes no arguments, not %q", args[0])
			}
			fmt.Fprintln(stdout, "hangar-envd", version)
			return nil
		}},
	}
}

func main() {
	ctx, stop := sandboxcmd.NotifyContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return sandboxcmd.Main(ctx, "hangar-envd", "hangar-envd: what hangar runs inside a sandbox.", verbs(), args, stdout, stderr)
}
