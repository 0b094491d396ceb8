package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/google/renameio/v2"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

const envdSummary = "Runs the in-sandbox daemon, compatible with E2B's envd: the process and filesystem Connect RPC\nservices, /health and /files."

// runEnvd runs the in-sandbox daemon until ctx is done (SIGTERM, SIGINT), then closes its
// listener, kills the processes it started and returns nil.
func runEnvd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	listen := daemon.DefaultAddress
	var token, addressFile, workdir, user string
	settings := []setting{
		{"listen", "ADDR", "address to listen on: host:port (port 0 picks one) or unix:/path/to/sock", stringValue{&listen, nonEmpty}},
		{"access-token", "TOKEN", "token every request but GET /health must send as X-Access-Token; none: none until POST /init sets one", stringValue{&token, nil}},
		{"address-file", "FILE", "once listening, write the bound address (host:port or unix:/path) to this file, atomically", stringValue{&addressFile, nil}},
		{"workdir", "DIR", "working directory of processes started without one, and base of relative paths; none: the user's home", stringValue{&workdir, nil}},
		{"user", "USER", "user requests run as when they name none; none: the user the daemon runs as", stringValue{&user, nil}},
	}
	if err := parseSettings("hangar envd", envdSummary, "HANGAR_ENVD_", settings, args, lookupEnv, stdout); err != nil {
		return err
	}
	if workdir != "" {
		if fi, err := os.Stat(workdir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--workdir %q is not a directory", workdir)
		}
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	d := daemon.New(daemon.Config{AccessToken: token, Workdir: workdir, DefaultUser: user, OwnHome: os.Getenv("HOME"), Logger: logger})
	ln, err := daemon.Listen(listen)
	if err != nil {
		return err
	}
	addr := daemon.Address(ln)
	if addressFile != "" {
		if err := renameio.WriteFile(addressFile, []byte(addr), 0o644); err != nil {
			ln.Close()
			return fmt.Errorf("write --address-file: %w", err)
		}
	}
	logger.Info("hangar envd listening", "address", addr, "auth", token != "")
	if err := d.Serve(ctx, ln); err != nil {
		return err
	}
	logger.Info("hangar envd stopped")
	return nil
}
