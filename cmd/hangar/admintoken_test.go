package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

// TestTokensFileAdminMakesNoFirstToken: an operator whose tokens file names an admin has one;
// hangar makes no other, writes no admin-token file and prints nothing about one.
func TestTokensFileAdminMakesNoFirstToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TokensFile = filepath.Join(t.TempDir(), "tokens")
	const static = "static-admin-0123456789abcdef0123456789"
	if err := os.WriteFile(cfg.TokensFile, []byte(static+" ops admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServe(t, cfg)
	if _, err := os.Stat(filepath.Join(cfg.DataDir, adminTokenFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an admin-token file beside a tokens file that names an admin: %v", err)
	}
	if out := ts.stdout.String(); strings.Contains(out, "admin token") {
		t.Errorf("stdout speaks of a first admin token: %q", out)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"admin-token", "--data-dir", cfg.DataDir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "hangar made no first admin token here") {
		t.Errorf("hangar admin-token = %d %q, want 1 and a sentence saying there is none", code, errOut.String())
	}
}

// TestFirstTokenShownOnATerminal: a person running hangar in a terminal sees the token once.
func TestFirstTokenShownOnATerminal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	authn := newAuthn(t, dir)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := bootstrapAdmin(ctx, authn, dir, tty); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	shown, _ := io.ReadAll(ptmx) // ends with EIO once the terminal's side is closed and read
	tok, err := os.ReadFile(filepath.Join(dir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(shown), strings.TrimSpace(string(tok))) {
		t.Errorf("the terminal was not shown the token: %q", shown)
	}
}

// TestFirstTokenNotMadeWhenItCannotBeKept: when <data dir>/admin-token cannot be made (here, a
// file is there already), the start fails with a sentence, no token is made (the next start
// tries again), and nothing is printed: the token never reaches a log as its only copy.
func TestFirstTokenNotMadeWhenItCannotBeKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	authn := newAuthn(t, dir)
	if err := os.WriteFile(filepath.Join(dir, adminTokenFile), []byte("someone else's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	err := bootstrapAdmin(ctx, authn, dir, &log)
	if err == nil || !strings.Contains(err.Error(), "already exists; move it away") {
		t.Errorf("bootstrapAdmin = %v, want an error saying the file is in the way", err)
	}
	if log.Len() > 0 {
		t.Errorf("printed %q, want nothing", log.String())
	}
	if needed, err := authn.NeedsBootstrap(ctx); err != nil || !needed {
		t.Errorf("NeedsBootstrap after = %v, %v; want true: no token was made", needed, err)
	}
}

// newAuthn is an authenticator on a new SQLite store in dir, with no tokens file.
func newAuthn(t *testing.T, dir string) *auth.Authenticator {
	t.Helper()
	st, err := sqlitetest.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	authn, err := auth.New(context.Background(), auth.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return authn
}
