package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// envdFlag is one flag of `hangar envd` and the environment variable that sets it when the
// flag is not given.
type envdFlag struct {
	name, env, def, usage string
	value                 *string
}

// runEnvd runs the in-sandbox daemon until ctx is done (SIGTERM, SIGINT), then closes its
// listener, kills the processes it started and returns nil.
func runEnvd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hangar envd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var listen, token, addressFile, workdir, user string
	flags := []envdFlag{
		{"listen", "HANGAR_ENVD_LISTEN", daemon.DefaultAddress, "address to listen on: host:port (port 0 picks one) or unix:/path/to/sock", &listen},
		{"access-token", "HANGAR_ENVD_ACCESS_TOKEN", "", "token every request but GET /health must send as X-Access-Token; empty: none until POST /init sets one", &token},
		{"address-file", "HANGAR_ENVD_ADDRESS_FILE", "", "once listening, write the bound address (host:port or unix:/path) to this file, atomically", &addressFile},
		{"workdir", "HANGAR_ENVD_WORKDIR", "", "working directory of processes started without one, and base of relative paths; empty: the user's home", &workdir},
		{"user", "HANGAR_ENVD_USER", "", "user requests run as when they name none; empty: the user the daemon runs as", &user},
	}
	for _, f := range flags {
		def := f.def
		if v, ok := os.LookupEnv(f.env); ok {
			def = v
		}
		fs.StringVar(f.value, f.name, def, fmt.Sprintf("%s (env %s)", f.usage, f.env))
	}
	fs.Usage = func() {
		fmt.Fprintln(stdout, "Usage: hangar envd [flags]\n\nRuns the in-sandbox daemon, compatible with E2B's envd (process and filesystem")
		fmt.Fprintln(stdout, "Connect RPC services, /health, /files). Each flag can be set by its environment variable;")
		fmt.Fprintln(stdout, "the flag wins.\n\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (run 'hangar envd --help')", fs.Args())
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
		if err := writeFileAtomic(addressFile, []byte(addr)); err != nil {
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

// writeFileAtomic writes data to a temporary file next to path and renames it over path, so a
// reader sees either nothing or all of it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
