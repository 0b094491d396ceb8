package sandboxcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Verb is one subcommand of a program. Run gets the arguments after the verb's name and the
// process's standard streams; it returns flag.ErrHelp when --help was asked for, and an
// ExitCode to exit with that code and say nothing more.
type Verb struct {
	Name, Summary string
	Run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// Main runs the verb args[0] of program (about is the first line of its usage) and returns the
// exit code: 0, the verb's ExitCode, 1 with the error on stderr, or 2 for no or an unknown verb.
func Main(ctx context.Context, program, about string, verbs []Verb, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, program, about, verbs)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, v := range verbs {
		if v.Name != args[0] {
			continue
		}
		err := v.Run(ctx, args[1:], stdout, stderr)
		var code ExitCode
		switch {
		case err == nil:
			return 0
		case errors.As(err, &code):
			return int(code)
		case errors.Is(err, flag.ErrHelp):
			return 0
		default:
			fmt.Fprintf(stderr, "%s %s: %v\n", program, v.Name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (run '%s --help' for the list)\n", program, args[0], program)
	return 2
}

func usage(w io.Writer, program, about string, verbs []Verb) {
	fmt.Fprintln(w, about)
	fmt.Fprintf(w, "\nUsage: %s <command> [flags]\n\nCommands:\n", program)
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-8s %s\n", v.Name, v.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n", program)
}
