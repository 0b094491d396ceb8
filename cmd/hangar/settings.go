package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/addrlimit"
	"github.com/hangar-dev/hangar/internal/settings"
)

// The machinery is package settings', shared with hangar-envd. setting, stringValue and
// intValue are defined here on its types so that the settings tables keep their short
// literals (go vet wants keyed fields in literals of another package's types).

// A setting is one flag with its HANGAR_* environment variable (settings.Setting).
type setting settings.Setting

// parseSettings is settings.Parse over this package's settings.
func parseSettings(cmd, summary, envPrefix string, ss []setting, args []string, getenv func(string) (string, bool), stdout io.Writer) error {
	conv := make([]settings.Setting, len(ss))
	for i, s := range ss {
		conv[i] = settings.Setting(s)
	}
	return settings.Parse(cmd, summary, envPrefix, conv, args, getenv, stdout)
}

func (s setting) env(prefix string) string { return settings.Setting(s).Env(prefix) }

// lookupEnv is os.LookupEnv, but an empty variable counts as unset (settings.LookupEnv).
func lookupEnv(name string) (string, bool) { return settings.LookupEnv(name) }

// The value kinds. Each refuses what it cannot use with a short reason.

// stringValue is settings.String.
type stringValue settings.String

func (v stringValue) String() string     { return settings.String(v).String() }
func (v stringValue) Set(s string) error { return settings.String(v).Set(s) }

func hostPort(s string) error {
	if _, port, err := net.SplitHostPort(s); err != nil {
		return errors.New("must be host:port, like 127.0.0.1:8080")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("the port must be a number from 0 to 65535")
	}
	return nil
}

func nonEmpty(s string) error { return settings.NonEmpty(s) }

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

// originURL is an http(s) URL with no path, query or fragment: what OAuth's issuer must be.
func originURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be an http:// or https:// URL with no path, like https://hangar.example.com")
	}
	return nil
}

// hostList is comma-separated hosts (host or host:port), or *.
func hostList(s string) error {
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ @?#") {
			return errors.New("must be hosts separated by commas, like clients.example.com,apps.example.org:8443, or *")
		}
	}
	return nil
}

func prefixList(s string) error {
	if _, err := addrlimit.ParsePrefixes(s); err != nil {
		return errors.New("must be addresses or CIDR prefixes separated by commas, like 10.52.7.0/24,192.168.1.7")
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

// cpus is a decimal number of CPUs from 0 (no limit) to 1024, like 2 or 0.5.
func cpus(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1024 || f != f {
		return errors.New("must be a number of CPUs from 0 (no limit) to 1024, like 2 or 0.5")
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

// intValue is a whole number from min to max (settings.Int).
type intValue settings.Int

func (v intValue) String() string     { return settings.Int(v).String() }
func (v intValue) Set(s string) error { return settings.Int(v).Set(s) }

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

// optionalSize is a sizeValue that also takes 0, for none.
type optionalSize struct{ sizeValue }

func (v optionalSize) Set(s string) error {
	if strings.TrimSpace(s) == "0" {
		*v.p = 0
		return nil
	}
	return v.sizeValue.Set(s)
}
