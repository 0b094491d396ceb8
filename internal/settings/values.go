package settings

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The value kinds a Setting may hold. Each refuses what it cannot use with a short reason,
// which Parse puts after the variable or flag and the value; each shows its value in --help
// as it takes it, so the help's default can be typed back.

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

// Duration is a Go duration (30s, 2m) from Min to Max, so that no setting overflows what uses
// it.
type Duration struct {
	P        *time.Duration
	Min, Max time.Duration
}

func (v Duration) String() string {
	if v.P == nil {
		return ""
	}
	return v.P.String()
}

func (v Duration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < v.Min || d > v.Max {
		return fmt.Errorf("must be a duration from %v to %v, like 30s or 2m", v.Min, v.Max)
	}
	*v.P = d
	return nil
}

// Bool is true or false (also 1/0, t/f, as strconv.ParseBool takes them).
type Bool struct{ P *bool }

func (v Bool) String() string {
	if v.P == nil {
		return ""
	}
	return strconv.FormatBool(*v.P)
}

func (v Bool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("must be true or false")
	}
	*v.P = b
	return nil
}

// IsBoolFlag lets the flag be given alone (--stream-turn-logs means true).
func (v Bool) IsBoolFlag() bool { return true }

// Size is a byte count from Min to Max: a whole number, optionally with KiB, MiB or GiB after
// it. --help shows it in the largest unit that divides it (1MiB).
type Size struct {
	P        *int64
	Min, Max int64
}

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

func (v Size) String() string {
	if v.P == nil {
		return ""
	}
	for _, u := range sizeUnits {
		if *v.P >= u.n && *v.P%u.n == 0 {
			return fmt.Sprintf("%d%s", *v.P/u.n, u.suffix)
		}
	}
	return strconv.FormatInt(*v.P, 10)
}

func (v Size) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > v.Max/mult || n*mult < v.Min {
		return fmt.Errorf("must be a number of bytes from %s to %s, like 1048576 or 1MiB (KiB, MiB and GiB are understood)",
			Size{P: &v.Min}.String(), Size{P: &v.Max}.String())
	}
	*v.P = n * mult
	return nil
}

// OptionalSize is a Size that also takes 0, for none.
type OptionalSize struct{ Size }

func (v OptionalSize) Set(s string) error {
	if strings.TrimSpace(s) == "0" {
		*v.P = 0
		return nil
	}
	return v.Size.Set(s)
}

// Checks for String values.

// NonEmpty refuses an empty or blank value.
func NonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("must not be empty")
	}
	return nil
}

// HostPort is a listening or dialling address, host:port with a port from 0 to 65535.
func HostPort(s string) error {
	if _, port, err := net.SplitHostPort(s); err != nil {
		return errors.New("must be host:port, like 127.0.0.1:8080")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("the port must be a number from 0 to 65535")
	}
	return nil
}

// HTTPURL is an http:// or https:// URL with a host.
func HTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http:// or https:// URL")
	}
	return nil
}

// MinLen refuses a value shorter than n bytes.
func MinLen(n int) func(string) error {
	return func(s string) error {
		if len(s) < n {
			return fmt.Errorf("must be at least %d characters", n)
		}
		return nil
	}
}

// OneOf refuses a value that is none of options.
func OneOf(options ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(options, s) {
			return fmt.Errorf("must be one of %s", strings.Join(options, ", "))
		}
		return nil
	}
}
