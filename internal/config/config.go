// Package config holds the settings of `hangar serve` and their documented defaults. Values come
// from HANGAR_* environment variables and flags, which only cmd/hangar reads; every other package
// takes the part of Config it needs.
package config

import "time"

// Config is everything `hangar serve` can be told. The zero value is not useful: start from
// Default and override.
type Config struct {
	// Listen is the address of the one listener serving /api, /mcp, /healthz, /readyz and
	// /metrics. Default 127.0.0.1:8080.
	Listen string
	// DataDir holds the SQLite database, the admin token file and local sandboxes.
	// Default ./.hangar.
	DataDir string
	// DatabaseURL, when set, selects PostgreSQL (postgres://...) instead of SQLite. Default "".
	DatabaseURL string
	// TokensFile, when set, lists static tokens, one per line. Default "".
	TokensFile string
	// LogFormat is text or json. Default text.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// ShutdownGrace is how long in-flight requests may take to finish after SIGTERM or SIGINT.
	// Default 30s.
	ShutdownGrace time.Duration
	// MaxBodyBytes caps every request body; a larger one is refused with 413. Default 1 MiB.
	MaxBodyBytes int64

	Stream Stream
}

// Stream holds the limits of spec/streaming.md's "Limits and closing" table, with its names and
// defaults.
type Stream struct {
	// MaxPerToken is how many streams one token may hold open. Default 16.
	MaxPerToken int
	// MaxTotal is how many streams may be open in all, hangar's own included. Default 512.
	MaxTotal int
	// BytesPerSecond paces each stream; every message also counts 64 bytes. Default 1 MiB.
	BytesPerSecond int64
	// MaxBytes caps what one stream sends. Default 64 MiB.
	MaxBytes int64
	// MaxHours closes event and watch streams open longer. Default 12.
	MaxHours int
	// BackgroundMaxPerToken is how many background processes one token may have running.
	// Default 16.
	BackgroundMaxPerToken int
	// WatchMaxPerToken is how many directory watches one token may hold. Default 8.
	WatchMaxPerToken int
	// RecheckSeconds is how often open streams check that their token is still valid. Default 5.
	RecheckSeconds int
	// TurnLogs makes running turns' logs be followed through the daemon. Default true.
	TurnLogs bool
}

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Listen:        "127.0.0.1:8080",
		DataDir:       "./.hangar",
		LogFormat:     "text",
		LogLevel:      "info",
		ShutdownGrace: 30 * time.Second,
		MaxBodyBytes:  1 << 20,
		Stream: Stream{
			MaxPerToken:           16,
			MaxTotal:              512,
			BytesPerSecond:        1 << 20,
			MaxBytes:              64 << 20,
			MaxHours:              12,
			BackgroundMaxPerToken: 16,
			WatchMaxPerToken:      8,
			RecheckSeconds:        5,
			TurnLogs:              true,
		},
	}
}
