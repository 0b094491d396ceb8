package main

import (
	"bytes"
	"errors"
	"flag"
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
		s.MaxHours != 12 || s.BackgroundMaxPerToken != 16 || s.WatchMaxPerToken != 8 || s.RecheckSeconds != 5 || !s.TurnLogs {
		t.Errorf("stream defaults = %+v, differ from spec/streaming.md", s)
	}
	if got.Listen != "127.0.0.1:8080" || got.DataDir != "./.hangar" || got.MaxBodyBytes != 1<<20 {
		t.Errorf("defaults = %+v", got)
	}
}

func TestServeConfigOverrides(t *testing.T) {
	e := env(map[string]string{
		"HANGAR_LISTEN":                  "0.0.0.0:9090",
		"HANGAR_STREAM_MAX_PER_TOKEN":    "4",
		"HANGAR_STREAM_BYTES_PER_SECOND": "2MiB",
		"HANGAR_STREAM_TURN_LOGS":        "false",
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
	if got.Stream.BytesPerSecond != 2<<20 || got.Stream.TurnLogs || got.DatabaseURL != "postgres://u:p@localhost:5432/db" ||
		got.ShutdownGrace != 5*time.Second || got.LogFormat != "json" || got.MaxBodyBytes != 4096 {
		t.Errorf("overrides not applied: %+v", got)
	}
}

func TestServeConfigInvalid(t *testing.T) {
	cases := []struct {
		env, value string
	}{
		{"HANGAR_LISTEN", "8080"},
		{"HANGAR_LISTEN", "localhost:99999"},
		{"HANGAR_DATA_DIR", "  "},
		{"HANGAR_DATABASE_URL", "mysql://x"},
		{"HANGAR_DATABASE_URL", "::not a url"},
		{"HANGAR_LOG_FORMAT", "xml"},
		{"HANGAR_LOG_LEVEL", "loud"},
		{"HANGAR_SHUTDOWN_GRACE", "soon"},
		{"HANGAR_SHUTDOWN_GRACE", "-5s"},
		{"HANGAR_MAX_BODY_BYTES", "-1"},
		{"HANGAR_MAX_BODY_BYTES", "1TB"},
		{"HANGAR_STREAM_MAX_PER_TOKEN", "-1"},
		{"HANGAR_STREAM_MAX_PER_TOKEN", "0"},
		{"HANGAR_STREAM_MAX_TOTAL", "many"},
		{"HANGAR_STREAM_BYTES_PER_SECOND", "0"},
		{"HANGAR_STREAM_MAX_BYTES", "1.5MiB"},
		{"HANGAR_STREAM_MAX_HOURS", "-12"},
		{"HANGAR_BACKGROUND_MAX_PER_TOKEN", "x"},
		{"HANGAR_WATCH_MAX_PER_TOKEN", "-8"},
		{"HANGAR_STREAM_RECHECK_SECONDS", "0"},
		{"HANGAR_STREAM_TURN_LOGS", "maybe"},
	}
	for _, c := range cases {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			_, err := loadServeConfig(nil, env(map[string]string{c.env: c.value}), &bytes.Buffer{})
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.env) || !strings.Contains(msg, c.value) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming %s and the value", msg, c.env)
			}
		})
		flagName := "--" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(c.env, "HANGAR_"), "_", "-"))
		t.Run(flagName+"="+c.value, func(t *testing.T) {
			_, err := loadServeConfig([]string{flagName + "=" + c.value}, env(nil), &bytes.Buffer{})
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); !strings.Contains(msg, flagName) || !strings.Contains(msg, c.value) {
				t.Errorf("error %q: want it to name %s and the value", msg, flagName)
			}
		})
	}
	if _, err := loadServeConfig([]string{"--no-such-flag"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Error("an unknown flag was accepted")
	}
	if _, err := loadServeConfig([]string{"stray"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestServeHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := loadServeConfig([]string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help error = %v, want flag.ErrHelp", err)
	}
	c := config.Default()
	for _, s := range serveSettings(&c) {
		line := "--" + s.name + " " + s.arg + "\t" + s.env("HANGAR_") + " (default "
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
	for _, v := range verbs() {
		t.Run(v.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(t.Context(), []string{v.name, "--help"}, &out, &errOut); code != 0 {
				t.Fatalf("hangar %s --help exited %d: %s", v.name, code, errOut.String())
			}
			if !strings.Contains(out.String()+errOut.String(), "Usage") && !strings.Contains(out.String()+errOut.String(), "--") {
				t.Errorf("hangar %s --help printed no usage: %q", v.name, out.String()+errOut.String())
			}
		})
	}
}

// TestConfigurationDocListsEverySetting keeps docs/configuration.md in step with the flags.
func TestConfigurationDocListsEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	for _, s := range serveSettings(&c) {
		row := "| `" + s.env("HANGAR_") + "` | `--" + s.name + "` | `" + s.value.String() + "` |"
		if s.value.String() == "" {
			row = "| `" + s.env("HANGAR_") + "` | `--" + s.name + "` | none |"
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/configuration.md lacks the row %q", row)
		}
	}
}
