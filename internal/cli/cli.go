// Package cli is hangar's command-line client: the verbs of the `hangar` binary that drive a
// hangar over its REST API (sandboxes, exec, background processes, sessions and jobs, tokens,
// the fleet, file watches). It talks HTTP only, through its own small REST client and SSE
// reader, and imports none of the server's packages.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Config is what the client verbs read from their process: its standard streams and its
// environment. cmd/hangar fills it from os.
type Config struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads HANGAR_URL, HANGAR_TOKEN (they override the config file), NO_COLOR,
	// XDG_CONFIG_HOME and HOME. Nil: os.Getenv.
	Getenv func(string) string
	// About is the root command's first line of help.
	About string
}

// ExitCode is an error that makes hangar exit with that code and print nothing more: a
// remote command's exit code, or 130 after an interrupt.
type ExitCode int

func (c ExitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// usageError is a mistake in the command line: exit code 2, with the command's usage hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT), as a shell reports it.
const exitInterrupted = ExitCode(130)

// NewRoot makes the root command `hangar` with every client verb; add the other verbs (serve,
// envd, ...) to it with AddCommand, then run it with Execute.
func NewRoot(cfg Config) *cobra.Command {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	a := &app{cfg: cfg}
	root := &cobra.Command{
		Use:           "hangar",
		Short:         cfg.About,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return ExitCode(2)
		},
	}
	root.SetIn(cfg.Stdin)
	root.SetOut(cfg.Stdout)
	root.SetErr(cfg.Stderr)
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		_, err := a.json() // a bad --output is a usage error before anything is asked of hangar
		return err
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.AddGroup(&cobra.Group{ID: "client", Title: "Client commands (talk to a hangar over its REST API):"},
		&cobra.Group{ID: "server", Title: "Server and sandbox commands:"})
	for _, c := range a.commands() {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("client")
	root.SetCompletionCommandGroupID("client")
	return root
}

// AddVerb adds a server or in-sandbox verb to root, in the "server" group of its help: run gets
// every argument after the verb's name, flags included, and parses them itself.
func AddVerb(root *cobra.Command, name, summary string, run func(ctx context.Context, args []string) error) {
	root.AddCommand(&cobra.Command{
		Use:                name,
		Short:              summary,
		GroupID:            "server",
		DisableFlagParsing: true,
		RunE:               func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) },
	})
}

// Execute runs root with args and returns the exit code: 0; an ExitCode's; 2 for a mistake in
// the command line; 1 with the error on stderr.
func Execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var code ExitCode
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage), strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(root.ErrOrStderr(), "hangar: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return 2
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return int(exitInterrupted)
	default:
		fmt.Fprintf(root.ErrOrStderr(), "hangar: %v\n", err)
		return 1
	}
}

// app is what every client verb shares: the process's streams and environment, and the
// --output flag of the verb that runs.
type app struct {
	cfg    Config
	output string // "table" or "json"
}

func (a *app) commands() []*cobra.Command {
	cmds := []*cobra.Command{a.loginCmd(), a.whoamiCmd(), a.sandboxCmd(), a.execCmd(), a.psCmd(), a.startCmd(), a.attachCmd(), a.killCmd(),
		a.logsCmd(), a.sessionsCmd(), a.jobsCmd(), a.tokensCmd(), a.fleetCmd(), a.watchCmd(), a.metricsCmd()}
	return cmds
}

// group makes cmd a verb of verbs: run alone it shows its help (exit 2), with an unknown verb
// it says so.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())}
		}
		cmd.Help()
		return ExitCode(2)
	}
	return cmd
}

// exactArgs is cobra.ExactArgs with a usage error naming what is wanted.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Sprintf("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))}
		}
		return nil
	}
}

// outputFlag adds -o/--output to cmd: a table for people (the default) or json for scripts.
func (a *app) outputFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&a.output, "output", "o", "table", "output format: table or json")
}

func (a *app) json() (bool, error) {
	switch a.output {
	case "", "table":
		return false, nil
	case "json":
		return true, nil
	}
	return false, usageError{fmt.Sprintf("--output must be table or json, not %q", a.output)}
}

// jsonClient is what a command that asks hangar and prints its answer needs first: whether -o
// json was asked for (a bad --output is a usage error, before anything else) and the client the
// environment names.
func (a *app) jsonClient() (bool, *client, error) {
	asJSON, err := a.json()
	if err != nil {
		return false, nil, err
	}
	c, err := a.client()
	if err != nil {
		return false, nil, err
	}
	return asJSON, c, nil
}
