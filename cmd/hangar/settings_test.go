package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/config"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestServeConfigDefaults(t *testing.T) {
	t.Parallel()
	got, err := loadServeConfig(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatalf("loadServeConfig: %v", err)
	}
	if got != config.Default() {
		t.Fatalf("defaults = %+v, want %+v", got, config.Default())
	}
	// The spec's table, by value, so a changed default is caught here.
	s := got.Stream
	if s.MaxPerToken != 16 || s.MaxTotal != 512 || s.BytesPerSecond != 1<<20 || s.MaxBytes != 64<<20 ||
		s.BackgroundMaxPerToken != 16 || s.RecheckSeconds != 5 {
		t.Errorf("stream defaults = %+v, differ from spec/streaming.md", s)
	}
	if got.Listen != "127.0.0.1:8080" || got.DataDir != "./.hangar" || got.MaxBodyBytes != 1<<20 {
		t.Errorf("defaults = %+v", got)
	}
}

func TestServeConfigOverrides(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{
		"HANGAR_LISTEN":                  "0.0.0.0:9090",
		"HANGAR_STREAM_MAX_PER_TOKEN":    "4",
		"HANGAR_STREAM_BYTES_PER_SECOND": "2MiB",
		"HANGAR_DATABASE_URL":            "postgres://u:p@localhost:5432/db",
		"HANGAR_SHUTDOWN_GRACE":          "5s",
		"HANGAR_LOG_FORMAT":              "json",
	})
	got, err := loadServeConfig([]string{"--listen", "127.0.0.1:7070", "--stream-max-per-token=8", "--max-body-bytes", "4096"}, e, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("loadServeConfig: %v", err)
	}
	if got.Listen != "127.0.0.1:7070" {
		t.Errorf("Listen = %q: the flag must win over HANGAR_LISTEN", got.Listen)
	}
	if got.Stream.MaxPerToken != 8 {
		t.Errorf("MaxPerToken = %d: the flag must win over the variable", got.Stream.MaxPerToken)
	}
	if got.Stream.BytesPerSecond != 2<<20 || got.DatabaseURL != "postgres://u:p@localhost:5432/db" ||
		got.ShutdownGrace != 5*time.Second || got.LogFormat != "json" || got.MaxBodyBytes != 4096 {
		t.Errorf("overrides not applied: %+v", got)
	}
}

// TestServeConfigInvalid: every refusal is one line, worded the same for the variable and the
// flag, naming it as a person typed it (--shutdown-grace, not ---shutdown-grace or
// -shutdown-grace), the value and the reason. Exact text: a substring match let the flag's
// "---" through once.
func TestServeConfigInvalid(t *testing.T) {
	t.Parallel()
	const (
		positiveBytes = "must be a number of bytes from %s to %s, like 1048576 or 1MiB (KiB, MiB and GiB are understood)"
		wholeNumber   = "must be a whole number from %d to %d"
	)
	cases := []struct {
		env, value, reason string
	}{
		{"HANGAR_LISTEN", "8080", "must be host:port, like 127.0.0.1:8080"},
		{"HANGAR_LISTEN", "localhost:99999", "the port must be a number from 0 to 65535"},
		{"HANGAR_DATA_DIR", "  ", "must not be empty"},
		{"HANGAR_DATABASE_URL", "mysql://x", "must be a PostgreSQL URL, like postgres://user:password@localhost:5432/hangar"},
		{"HANGAR_DATABASE_URL", "::not a url", "must be a PostgreSQL URL, like postgres://user:password@localhost:5432/hangar"},
		{"HANGAR_LOG_FORMAT", "xml", "must be one of text, json"},
		{"HANGAR_LOG_LEVEL", "loud", "must be one of debug, info, warn, error"},
		{"HANGAR_SHUTDOWN_GRACE", "soon", "must be a duration from 1ms to 1h0m0s, like 30s or 2m"},
		{"HANGAR_SHUTDOWN_GRACE", "-5s", "must be a duration from 1ms to 1h0m0s, like 30s or 2m"},
		{"HANGAR_SHUTDOWN_GRACE", "100000000h", "must be a duration from 1ms to 1h0m0s, like 30s or 2m"},
		{"HANGAR_MAX_BODY_BYTES", "-1", fmt.Sprintf(positiveBytes, "1KiB", "1GiB")},
		{"HANGAR_MAX_BODY_BYTES", "1TB", fmt.Sprintf(positiveBytes, "1KiB", "1GiB")},
		{"HANGAR_MAX_BODY_BYTES", "2GiB", fmt.Sprintf(positiveBytes, "1KiB", "1GiB")},
		{"HANGAR_MAX_BODY_BYTES", "9223372036854775807GiB", fmt.Sprintf(positiveBytes, "1KiB", "1GiB")},
		{"HANGAR_STREAM_MAX_PER_TOKEN", "-1", fmt.Sprintf(wholeNumber, 1, 100_000)},
		{"HANGAR_STREAM_MAX_PER_TOKEN", "0", fmt.Sprintf(wholeNumber, 1, 100_000)},
		{"HANGAR_STREAM_MAX_TOTAL", "many", fmt.Sprintf(wholeNumber, 1, 1_000_000)},
		{"HANGAR_STREAM_MAX_TOTAL", "100000000", fmt.Sprintf(wholeNumber, 1, 1_000_000)},
		{"HANGAR_STREAM_BYTES_PER_SECOND", "0", fmt.Sprintf(positiveBytes, "1KiB", "1024GiB")},
		{"HANGAR_STREAM_BYTES_PER_SECOND", "1025GiB", fmt.Sprintf(positiveBytes, "1KiB", "1024GiB")},
		{"HANGAR_STREAM_MAX_BYTES", "1.5MiB", fmt.Sprintf(positiveBytes, "1KiB", "1024GiB")},
		{"HANGAR_BACKGROUND_MAX_PER_TOKEN", "x", fmt.Sprintf(wholeNumber, 1, 10_000)},
		{"HANGAR_STREAM_RECHECK_SECONDS", "0", fmt.Sprintf(wholeNumber, 1, 3600)},
		{"HANGAR_STREAM_RECHECK_SECONDS", "100000000000", fmt.Sprintf(wholeNumber, 1, 3600)},
		{"HANGAR_STREAM_QUEUE_BYTES", "1KiB", fmt.Sprintf(positiveBytes, "64KiB", "1GiB")},
		{"HANGAR_SECRET", "short", "must be at least 32 characters"},
	}
	for _, c := range cases {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			_, err := loadServeConfig(nil, env(map[string]string{c.env: c.value}), &bytes.Buffer{})
			want := fmt.Sprintf("invalid %s=%q: %s", c.env, c.value, c.reason)
			if err == nil || err.Error() != want {
				t.Errorf("error = %v\nwant    %s", err, want)
			}
		})
		flagName := "--" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(c.env, "HANGAR_"), "_", "-"))
		t.Run(flagName+"="+c.value, func(t *testing.T) {
			_, err := loadServeConfig([]string{flagName + "=" + c.value}, env(nil), &bytes.Buffer{})
			want := fmt.Sprintf("invalid %s=%q: %s", flagName, c.value, c.reason)
			if err == nil || err.Error() != want {
				t.Errorf("error = %v\nwant    %s", err, want)
			}
		})
	}
}

// TestServeFlagErrors: the flag package's own errors, in the help's "--name".
func TestServeFlagErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "unknown flag --no-such-flag (run 'hangar serve --help' for the flags)"},
		{[]string{"-no-such-flag=1"}, "unknown flag --no-such-flag (run 'hangar serve --help' for the flags)"},
		{[]string{"--listen"}, "flag --listen needs a value (--listen=VALUE)"},
		{[]string{"stray"}, "unexpected argument \"stray\" (settings are flags: run 'hangar serve --help')"},
		{[]string{"--stream-turn-logs=maybe"}, `invalid --stream-turn-logs="maybe": must be true or false`},
		{[]string{"--stream-max-hours=0"}, `invalid --stream-max-hours="0": must be a whole number from 1 to 8760`},
		{[]string{"--watch-max-per-token=x"}, `invalid --watch-max-per-token="x": must be a whole number from 1 to 10000`},
	}
	for _, c := range cases {
		_, err := loadServeConfig(c.args, env(nil), &bytes.Buffer{})
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error = %v\nwant    %s", c.args, err, c.want)
		}
	}
}

func TestServeHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	_, err := loadServeConfig([]string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help error = %v, want flag.ErrHelp", err)
	}
	c := config.Default()
	for _, s := range serveSettings(&c) {
		line := "--" + s.Name + " " + s.Arg + "\t" + s.Env("HANGAR_") + " (default "
		if !strings.Contains(out.String(), line) {
			t.Errorf("help lacks %q", line)
		}
	}
	for _, want := range []string{"HANGAR_STREAM_MAX_PER_TOKEN (default 16)", "HANGAR_STREAM_BYTES_PER_SECOND (default 1MiB)", "HANGAR_STREAM_MAX_BYTES (default 64MiB)", "HANGAR_LISTEN (default 127.0.0.1:8080)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestEveryVerbHasHelp(t *testing.T) {
	t.Parallel()
	for _, v := range verbs() {
		t.Run(v.Name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(t.Context(), []string{v.Name, "--help"}, &out, &errOut); code != 0 {
				t.Fatalf("hangar %s --help exited %d: %s", v.Name, code, errOut.String())
			}
			if !strings.Contains(out.String()+errOut.String(), "Usage") && !strings.Contains(out.String()+errOut.String(), "--") {
				t.Errorf("hangar %s --help printed no usage: %q", v.Name, out.String()+errOut.String())
			}
		})
	}
}

// TestConfigurationDocListsEverySetting keeps docs/configuration.md in step with the flags.
func TestConfigurationDocListsEverySetting(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	for _, s := range serveSettings(&c) {
		row := "| `" + s.Env("HANGAR_") + "` | `--" + s.Name + "` | `" + s.Value.String() + "` |"
		if s.Value.String() == "" {
			row = "| `" + s.Env("HANGAR_") + "` | `--" + s.Name + "` | none |"
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/configuration.md lacks the row %q", row)
		}
	}
}
