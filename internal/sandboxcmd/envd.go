package sandboxcmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/google/renameio/v2"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/settings"
)

const envdSummary = "Runs the in-sandbox daemon, compatible with E2B's envd: the process and filesystem Connect RPC\nservices, /health and /files."

// Envd runs the in-sandbox daemon until ctx is done (SIGTERM, SIGINT), then closes its
// listener, kills the processes it started and returns nil, or the ExitCode of the signal that
// ended ctx when NotifyContext made it (143 for SIGTERM). cmd is how help names the
// command: "hangar-envd envd" or "hangar envd".
func Envd(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	// Before a token is read, from the environment or a request.
	if err := hideMemory(); err != nil {
		return err
	}
	listen := daemon.DefaultAddress
	var token, tokenHash, addressFile, workdir, user string
	ss := []settings.Setting{
		{Name: "listen", Arg: "ADDR", Usage: "address to listen on: host:port (port 0 picks one) or unix:/path/to/sock", Value: settings.String{P: &listen, Check: settings.NonEmpty}},
		{Name: "access-token", Arg: "TOKEN", Usage: "token every request but GET /health must send as X-Access-Token; none: none until POST /init sets one", Value: settings.String{P: &token}},
		{Name: "access-token-sha256", Arg: "HEX", Usage: "the SHA-256 (hex) of that token instead of the token: the daemon needs the token from its start, and its command line and environment, which commands in the sandbox can read, do not hold it", Value: settings.String{P: &tokenHash}},
		{Name: "address-file", Arg: "FILE", Usage: "once listening, write the bound address (host:port or unix:/path) to this file, atomically", Value: settings.String{P: &addressFile}},
		{Name: "workdir", Arg: "DIR", Usage: "working directory of processes started without one, and base of relative paths; none: the user's home", Value: settings.String{P: &workdir}},
		{Name: "user", Arg: "USER", Usage: "user requests run as when they name none; none: the user the daemon runs as", Value: settings.String{P: &user}},
	}
	if err := settings.Parse(cmd, envdSummary, "HANGAR_ENVD_", ss, args, settings.LookupEnv, stdout); err != nil {
		return err
	}
	if token != "" && tokenHash != "" {
		return fmt.Errorf("give --access-token or --access-token-sha256, not both")
	}
	if _, err := daemon.ParseTokenSHA256(tokenHash); err != nil {
		return fmt.Errorf("--access-token-sha256: %w", err)
	}
	if workdir != "" {
		if fi, err := os.Stat(workdir); err != nil || !fi.IsDir() {
			return fmt.Errorf("--workdir %q is not a directory", workdir)
		}
	}

	running := tuneRuntime(os.LookupEnv)
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if _, err := limits.RaiseOpenFiles(logger); err != nil {
		logger.Warn("the open files limit stays where it was", "error", err)
	}
	d := daemon.New(daemon.Config{AccessToken: token, AccessTokenSHA256: tokenHash, Workdir: workdir, DefaultUser: user, OwnHome: os.Getenv("HOME"), Logger: logger, Running: running})
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
	logger.Info("hangar envd listening", "address", addr, "auth", token != "" || tokenHash != "")
	if err := d.Serve(ctx, ln); err != nil {
		return err
	}
	logger.Info("hangar envd stopped", "cause", context.Cause(ctx))
	return exitForSignal(ctx)
}
