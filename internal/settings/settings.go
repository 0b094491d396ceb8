// Package settings reads a command's settings: each is a flag with a HANGAR_* environment
// variable, the environment applied first and the command line over it, both through the same
// flag.Value so they are checked alike. Both of hangar's binaries read theirs with it: hangar
// (serve and its other verbs) and hangar-envd (the daemon and the turn harness).
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// A Setting is one flag with its environment variable.
type Setting struct {
	Name  string // the flag's name; the variable is the prefix + NAME with '-' as '_'
	Arg   string // what the value looks like in --help: ADDR, DIR, N, BYTES, ...
	Usage string
	Value flag.Value
}

// Env is the setting's environment variable under prefix.
func (s Setting) Env(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// Parse applies the environment (read with getenv) and then args to settings. It returns
// flag.ErrHelp (after writing the help to stdout) when asked for help, and otherwise one-line
// errors that name the variable or flag and the value that was refused.
func Parse(cmd, summary, envPrefix string, settings []Setting, args []string, getenv func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defaults := make([]string, len(settings))
	var refused error // a flag's value that Set refused, in our words rather than the flag package's
	for i, s := range settings {
		defaults[i] = s.Value.String()
		fs.Var(flagValue{s, &refused}, s.Name, s.Usage)
	}
	fs.Usage = func() {}
	for _, s := range settings {
		name := s.Env(envPrefix)
		v, ok := getenv(name)
		if !ok {
			continue
		}
		if err := s.Value.Set(v); err != nil {
			return fmt.Errorf("invalid %s=%q: %v", name, v, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			writeHelp(stdout, cmd, summary, envPrefix, settings, defaults)
			return err
		case refused != nil:
			return refused
		}
		return flagError(err, cmd)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (settings are flags: run '%s --help')", fs.Arg(0), cmd)
	}
	return nil
}

// flagValue passes a flag's value to its setting and words a refusal as a variable's is
// worded, with the flag as the help shows it: "invalid --name=value: reason".
type flagValue struct {
	s       Setting
	refused *error
}

func (v flagValue) String() string {
	if v.s.Value == nil { // the flag package's zero value, for its own use
		return ""
	}
	return v.s.Value.String()
}

func (v flagValue) Set(s string) error {
	if err := v.s.Value.Set(s); err != nil {
		*v.refused = fmt.Errorf("invalid --%s=%q: %v", v.s.Name, s, err)
		return err
	}
	return nil
}

// flagError rewords the flag package's own errors (an unknown flag, a missing value, bad
// syntax), which name a flag "-name", with the "--name" the help shows.
func flagError(err error, cmd string) error {
	msg := err.Error()
	for _, m := range []struct{ prefix, format string }{
		{"flag provided but not defined: -", "unknown flag --%s (run '" + cmd + " --help' for the flags)"},
		{"flag needs an argument: -", "flag --%s needs a value (--%[1]s=VALUE)"},
	} {
		if name, ok := strings.CutPrefix(msg, m.prefix); ok {
			return fmt.Errorf(m.format, strings.TrimLeft(name, "-"))
		}
	}
	return fmt.Errorf("%s (run '%s --help' for the flags)", msg, cmd)
}

func writeHelp(w io.Writer, cmd, summary, envPrefix string, settings []Setting, defaults []string) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nEvery flag can also be set with the environment variable after it; the flag wins.\n\n", cmd, summary)
	for i, s := range settings {
		def := defaults[i]
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%s %s\t%s (default %s)\n      %s\n", s.Name, s.Arg, s.Env(envPrefix), def, s.Usage)
	}
}

// LookupEnv is os.LookupEnv, but an empty variable counts as unset, as shells often export them.
func LookupEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

// NoEnv is a getenv for commands whose settings are flags only.
func NoEnv(string) (string, bool) { return "", false }

// The value kinds both binaries use. Each refuses what it cannot use with a short reason.

// String is a string, checked by Check (nil: anything goes).
type String struct {
	P     *string
	Check func(string) error
}

func (v String) String() string {
	if v.P == nil {
		return ""
	}
	return *v.P
}

func (v String) Set(s string) error {
	if v.Check != nil {
		if err := v.Check(s); err != nil {
			return err
		}
	}
	*v.P = s
	return nil
}

// Int is a whole number from Min to Max: a bound for each, so that no setting overflows what
// it is multiplied into (a number of seconds into a time.Duration) or asks for the absurd.
type Int struct {
	P        *int
	Min, Max int
}

func (v Int) String() string {
	if v.P == nil {
		return ""
	}
	return strconv.Itoa(*v.P)
}

func (v Int) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < v.Min || n > v.Max {
		return fmt.Errorf("must be a whole number from %d to %d", v.Min, v.Max)
	}
	*v.P = n
	return nil
}

// NonEmpty refuses an empty or blank value.
func NonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("must not be empty")
	}
	return nil
}
