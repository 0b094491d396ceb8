// Package settings is hangar's one place for what a command can be told: a setting is a flag
// with a HANGAR_* environment variable, a default (the value it holds before Parse) and a help
// line. The environment is applied first and the command line over it, both through the same
// flag.Value, so they are checked alike and refused in the same words. It holds the value kinds
// (String, Int, Duration, Bool, Size) and the common checks. Every verb of hangar's two
// binaries that takes settings reads them with it: hangar's serve, health and admin-token
// (their tables are in cmd/hangar, the values in internal/config), and hangar-envd's envd,
// harness and turn-dir. The client verbs' flags are cobra's (internal/cli).
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
