package settings

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestParsePrecedence: the flag wins over the variable, which wins over the default.
func TestParsePrecedence(t *testing.T) {
	t.Parallel()
	a, b, c := "default a", "default b", "default c"
	ss := []Setting{
		{Name: "a-one", Value: String{P: &a}},
		{Name: "b-two", Value: String{P: &b}},
		{Name: "c-three", Value: String{P: &c}},
	}
	e := env(map[string]string{"X_A_ONE": "env a", "X_B_TWO": "env b"})
	if err := Parse("x", "", "X_", ss, []string{"--a-one=flag a"}, e, &bytes.Buffer{}); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if a != "flag a" || b != "env b" || c != "default c" {
		t.Errorf("a, b, c = %q, %q, %q; want the flag, the variable, the default", a, b, c)
	}
}

// TestParseErrors: one line naming the variable or flag as a person typed it.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{env: map[string]string{"X_N": "0"}, want: `invalid X_N="0": must be a whole number from 1 to 9`},
		{args: []string{"--n=10"}, want: `invalid --n="10": must be a whole number from 1 to 9`},
		{args: []string{"-n", "x"}, want: `invalid --n="x": must be a whole number from 1 to 9`},
		{args: []string{"--nope"}, want: "unknown flag --nope (run 'x --help' for the flags)"},
		{args: []string{"--n"}, want: "flag --n needs a value (--n=VALUE)"},
		{args: []string{"stray"}, want: `unexpected argument "stray" (settings are flags: run 'x --help')`},
	}
	for _, c := range cases {
		n := 5
		ss := []Setting{{Name: "n", Value: Int{P: &n, Min: 1, Max: 9}}}
		err := Parse("x", "", "X_", ss, c.args, env(c.env), &bytes.Buffer{})
		if err == nil || err.Error() != c.want {
			t.Errorf("%q %v: error = %v, want %s", c.args, c.env, err, c.want)
		}
	}
}

// TestHelp: each setting's line shows its flag, what its value looks like, its variable and
// its default as the value kind prints it (none when empty).
func TestHelp(t *testing.T) {
	t.Parallel()
	size, dir := int64(1<<20), ""
	ss := []Setting{
		{Name: "max-bytes", Arg: "BYTES", Usage: "the most", Value: Size{P: &size, Min: 1, Max: 1 << 30}},
		{Name: "dir", Arg: "DIR", Usage: "where", Value: String{P: &dir}},
	}
	var out bytes.Buffer
	err := Parse("x serve", "Serves.", "X_", ss, []string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: error = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{
		"Usage: x serve [flags]\n\nServes.\n",
		"  --max-bytes BYTES\tX_MAX_BYTES (default 1MiB)\n      the most\n",
		"  --dir DIR\tX_DIR (default none)\n      where\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestValues: what each value kind takes, what it holds then and how it prints it, and the
// reason it gives for what it refuses.
func TestValues(t *testing.T) {
	t.Parallel()
	var (
		d time.Duration
		b bool
		n int64
		s string
	)
	cases := []struct {
		v      flag.Value
		in     string
		shown  string // String() after a good Set
		refuse string // the reason, for a bad in
	}{
		{v: Duration{P: &d, Min: time.Second, Max: time.Hour}, in: "90s", shown: "1m30s"},
		{v: Duration{P: &d, Min: time.Second, Max: time.Hour}, in: "2h", refuse: "must be a duration from 1s to 1h0m0s, like 30s or 2m"},
		{v: Bool{P: &b}, in: "1", shown: "true"},
		{v: Bool{P: &b}, in: "yes", refuse: "must be true or false"},
		{v: Size{P: &n, Min: 1 << 10, Max: 1 << 30}, in: "2MiB", shown: "2MiB"},
		{v: Size{P: &n, Min: 1 << 10, Max: 1 << 30}, in: "1536", shown: "1536"},
		{v: Size{P: &n, Min: 1 << 10, Max: 1 << 30}, in: "0", refuse: "must be a number of bytes from 1KiB to 1GiB, like 1048576 or 1MiB (KiB, MiB and GiB are understood)"},
		{v: Size{P: &n, Min: 1 << 10, Max: 1 << 30}, in: "9223372036854775807GiB", refuse: "must be a number of bytes from 1KiB to 1GiB, like 1048576 or 1MiB (KiB, MiB and GiB are understood)"},
		{v: Size{P: &n, Min: 0, Max: 1 << 30}, in: "0", shown: "0"}, // HANGAR_GC_HEADROOM's "0: GOGC alone"
		{v: Size{P: &n, Min: 0, Max: 1 << 30}, in: "-1", refuse: "must be a number of bytes from 0 to 1GiB, like 1048576 or 1MiB (KiB, MiB and GiB are understood)"},
		{v: OptionalSize{Size: Size{P: &n, Min: 1 << 20, Max: 1 << 30}}, in: "0", shown: "0"},
		{v: OptionalSize{Size: Size{P: &n, Min: 1 << 20, Max: 1 << 30}}, in: "1KiB", refuse: "must be a number of bytes from 1MiB to 1GiB, like 1048576 or 1MiB (KiB, MiB and GiB are understood)"},
		{v: String{P: &s, Check: HostPort}, in: "localhost:0", shown: "localhost:0"},
		{v: String{P: &s, Check: HostPort}, in: "localhost:70000", refuse: "the port must be a number from 0 to 65535"},
		{v: String{P: &s, Check: HTTPURL}, in: "ftp://x", refuse: "must be an http:// or https:// URL"},
		{v: String{P: &s, Check: OneOf("a", "b")}, in: "c", refuse: "must be one of a, b"},
		{v: String{P: &s, Check: MinLen(3)}, in: "ab", refuse: "must be at least 3 characters"},
		{v: String{P: &s, Check: NonEmpty}, in: " ", refuse: "must not be empty"},
	}
	for _, c := range cases {
		err := c.v.Set(c.in)
		switch {
		case c.refuse != "" && (err == nil || err.Error() != c.refuse):
			t.Errorf("%T.Set(%q) = %v, want %s", c.v, c.in, err, c.refuse)
		case c.refuse == "" && err != nil:
			t.Errorf("%T.Set(%q) = %v", c.v, c.in, err)
		case c.refuse == "" && c.v.String() != c.shown:
			t.Errorf("%T.Set(%q) then String() = %q, want %q", c.v, c.in, c.v.String(), c.shown)
		}
	}
}
