package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A setting is one flag with its HANGAR_* environment variable. The environment is applied
// first and the command line overrides it; both go through the same flag.Value, so they are
// checked the same way.
type setting struct {
	name  string // the flag's name; the variable is envPrefix + NAME with '-' as '_'
	arg   string // what the value looks like in --help: ADDR, DIR, N, BYTES, ...
	usage string
	value flag.Value
}

func (s setting) env(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// parseSettings applies the environment and then args to settings. It returns flag.ErrHelp
// (after writing the help to stdout) when asked for help, and otherwise one-line errors that name
// the variable or flag and the value that was refused.
func parseSettings(cmd, summary, envPrefix string, settings []setting, args []string, getenv func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defaults := make([]string, len(settings))
	var refused error // a flag's value that Set refused, in our words rather than the flag package's
	for i, s := range settings {
		defaults[i] = s.value.String()
		fs.Var(flagValue{s, &refused}, s.name, s.usage)
	}
	fs.Usage = func() {}
	for _, s := range settings {
		name := s.env(envPrefix)
		v, ok := getenv(name)
		if !ok {
			continue
		}
		if err := s.value.Set(v); err != nil {
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
	s       setting
	refused *error
}

func (v flagValue) String() string {
	if v.s.value == nil { // the flag package's zero value, for its own use
		return ""
	}
	return v.s.value.String()
}

func (v flagValue) Set(s string) error {
	if err := v.s.value.Set(s); err != nil {
		*v.refused = fmt.Errorf("invalid --%s=%q: %v", v.s.name, s, err)
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

func writeHelp(w io.Writer, cmd, summary, envPrefix string, settings []setting, defaults []string) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nEvery flag can also be set with the environment variable after it; the flag wins.\n\n", cmd, summary)
	for i, s := range settings {
		def := defaults[i]
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%s %s\t%s (default %s)\n      %s\n", s.name, s.arg, s.env(envPrefix), def, s.usage)
	}
}

// lookupEnv is os.LookupEnv, but an empty variable counts as unset, as shells often export them.
func lookupEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

// The value kinds. Each refuses what it cannot use with a short reason.

type stringValue struct {
	p     *string
	check func(string) error // nil: anything goes
}

func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v stringValue) Set(s string) error {
	if v.check != nil {
		if err := v.check(s); err != nil {
			return err
		}
	}
	*v.p = s
	return nil
}

func hostPort(s string) error {
	if _, port, err := net.SplitHostPort(s); err != nil {
		return errors.New("must be host:port, like 127.0.0.1:8080")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("the port must be a number from 0 to 65535")
	}
	return nil
}

func nonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func minLen(n int) func(string) error {
	return func(s string) error {
		if len(s) < n {
			return fmt.Errorf("must be at least %d characters", n)
		}
		return nil
	}
}

func oneOf(options ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(options, s) {
			return fmt.Errorf("must be one of %s", strings.Join(options, ", "))
		}
		return nil
	}
}

// postgresURL accepts what pgx accepts as a URL: postgres:// or postgresql:// with a host.
func postgresURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("must be a PostgreSQL URL, like postgres://user:password@localhost:5432/hangar")
	}
	return nil
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http:// or https:// URL")
	}
	return nil
}

func dockerHost(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("must be a Docker engine address, like unix:///var/run/docker.sock or tcp://127.0.0.1:2375")
	}
	return nil
}

// durationValue is a duration from a minimum to a maximum, so that no setting overflows what
// uses it.
type durationValue struct {
	p        *time.Duration
	min, max time.Duration
}

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < v.min || d > v.max {
		return fmt.Errorf("must be a duration from %v to %v, like 30s or 2m", v.min, v.max)
	}
	*v.p = d
	return nil
}

// intValue is a whole number from min to max: a bound for each, so that no setting overflows
// what it is multiplied into (a number of seconds into a time.Duration) or asks for the absurd.
type intValue struct {
	p        *int
	min, max int
}

func (v intValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < v.min || n > v.max {
		return fmt.Errorf("must be a whole number from %d to %d", v.min, v.max)
	}
	*v.p = n
	return nil
}

// boolValue is true or false (also 1/0, t/f, as strconv.ParseBool takes them).
type boolValue struct{ p *bool }

func (v boolValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatBool(*v.p)
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("must be true or false")
	}
	*v.p = b
	return nil
}

// IsBoolFlag lets the flag be given alone (--stream-turn-logs means true).
func (v boolValue) IsBoolFlag() bool { return true }

// sizeValue is a byte count from min to max: a whole number, optionally with KiB, MiB or GiB
// after it.
type sizeValue struct {
	p        *int64
	min, max int64
}

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	for _, u := range sizeUnits {
		if *v.p >= u.n && *v.p%u.n == 0 {
			return fmt.Sprintf("%d%s", *v.p/u.n, u.suffix)
		}
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v sizeValue) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > v.max/mult || n*mult < v.min {
		return fmt.Errorf("must be a number of bytes from %s to %s, like 1048576 or 1MiB (KiB, MiB and GiB are understood)",
			sizeValue{p: &v.min}.String(), sizeValue{p: &v.max}.String())
	}
	*v.p = n * mult
	return nil
}
