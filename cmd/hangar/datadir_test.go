package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hangar-dev/hangar/internal/harness"
)

// TestDataDirPrivate starts hangar with a umask of 022 over an existing data dir of mode 0755
// whose secret file an older hangar left 0644: the dir ends 0700 (and the log says it was
// tightened), and every file hangar keeps there, SQLite's -wal and -shm included, 0600.
func TestDataDirPrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, set in case the runner's is stricter
	t.Cleanup(func() { syscall.Umask(old) })
	cfg := testConfig(t)
	if err := os.Mkdir(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cfg.DataDir, 0o755)
	if err := os.WriteFile(filepath.Join(cfg.DataDir, secretFile), []byte(strings.Repeat("k", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	// A write, so that SQLite's write-ahead log has something in it.
	if code, body := ts.api(t, "POST", "/api/tokens", tok, `{"user":"ada","scopes":["user"]}`); code != 201 {
		t.Fatalf("POST /api/tokens = %d %v", code, body)
	}
	fi, err := os.Stat(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode = %04o, want 0700", fi.Mode().Perm())
	}
	if !strings.Contains(ts.stderr.String(), "made it private") {
		t.Errorf("the log does not say the data dir was tightened:\n%s", ts.stderr.String())
	}
	if fi, err := os.Stat(filepath.Join(cfg.DataDir, "sandboxes")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("sandboxes folder: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}
	for _, name := range []string{"hangar.db", "hangar.db-wal", "hangar.db-shm", secretFile, adminTokenFile} {
		fi, err := os.Stat(filepath.Join(cfg.DataDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %04o, want 0600", name, fi.Mode().Perm())
		}
	}
	entries, err := os.ReadDir(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode = %04o: others may read it", e.Name(), fi.Mode().Perm())
		}
	}
}

// TestShortSecretFileKept: a secret file too short to be a key stops start-up and is left as
// it is; replacing it would leave every sealed env unopenable.
func TestShortSecretFileKept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, secretFile)
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSecret(cfg); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("loadSecret = %v, want an error saying the key is too short", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short" {
		t.Errorf("the secret file was replaced: %q", b)
	}
}

// TestDataDirThroughSymlink: a data dir reached through a symlink (/home -> /data/home) is
// resolved once at start, so the local provider's turns, whose directories are walked from /
// without following a symlink, can be made under it.
func TestDataDirThroughSymlink(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	dir, err := resolveDataDir(filepath.Join(base, "link", "data"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "real", "data"); dir != want {
		t.Errorf("data dir = %s, want %s", dir, want)
	}
	if _, err := harness.MakeTurnDir(filepath.Join(dir, "sandboxes", "box", "turns"), "turn_x"); err != nil {
		t.Errorf("a local turn's directory under the data dir: %v", err)
	}
}

// TestDataDirUnderOpenDir: a data dir under a directory others may write stops start-up with
// the local provider on, saying why and what to do, rather than every local turn failing as
// not hangar's alone; with it off, the data dir is used.
func TestDataDirUnderOpenDir(t *testing.T) {
	t.Parallel()
	open := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o775); err != nil {
		t.Fatal(err)
	}
	_, err := resolveDataDir(filepath.Join(open, "data"), true)
	for _, want := range []string{open + ": not hangar's alone: it is writable by group or others (mode 0775)", "HANGAR_LOCAL_PROVIDER=false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
	if _, err := resolveDataDir(filepath.Join(open, "data"), false); err != nil {
		t.Errorf("without the local provider: %v", err)
	}
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(open, "data2")
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a serve that started would return at once
	if err := serve(ctx, cfg, ln, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "HANGAR_LOCAL_PROVIDER=false") {
		t.Errorf("serve = %v, want it to stop, saying why", err)
	}
}
