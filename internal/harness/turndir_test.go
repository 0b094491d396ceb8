package harness_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/harness"
)

// TestMakeTurnDir: a turn's directory is made 0700 in a root made 0700 (and an existing root of
// an earlier hangar's, 0755, made so), never twice, and its files are written and read through
// it.
func TestMakeTurnDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "var", "turns")
	dir, err := harness.MakeTurnDir(root, "turn_a")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(root, "turn_a") {
		t.Errorf("made %s, want %s", dir, filepath.Join(root, "turn_a"))
	}
	for _, d := range []string{root, dir} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want mode 0700", d, fi, err)
		}
	}
	if _, err := harness.MakeTurnDir(root, "turn_a"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("making turn_a again: %v, want it refused (it exists)", err)
	}
	old := filepath.Join(base, "old")
	os.Mkdir(old, 0o755)
	if _, err := harness.MakeTurnDir(old, "turn_b"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(old); fi.Mode().Perm() != 0o700 {
		t.Errorf("an earlier root is %v, want made 0700", fi.Mode())
	}

	d, err := harness.OpenTurnDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := harness.AppendTurnFile(d, harness.PromptFile, []byte("hello ")); err != nil {
		t.Fatal(err)
	}
	harness.AppendTurnFile(d, harness.PromptFile, []byte("world"))
	if err := harness.WriteTurnFile(d, harness.StatusFile, []byte(`{"exit_code":0}`)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := harness.ReadTurnFile(d, harness.PromptFile, 6, 3, &b); err != nil || b.String() != "wor" {
		t.Errorf("read prompt[6:9] = %q, %v; want \"wor\"", b.String(), err)
	}
	if err := harness.ReadTurnFile(d, harness.RunLogFile, 0, -1, &b); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read a missing run log: %v, want not exist", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("turn directory holds %v, want the prompt and the status file only", entries)
	}
}

// TestTurnDirRefused: a turn's directory, or a file in it, that another uid could write,
// replace or redirect is refused, each with ErrNotPrivate.
func TestTurnDirRefused(t *testing.T) {
	t.Parallel()
	asRoot := os.Geteuid() == 0
	cases := []struct {
		name     string
		rootOnly bool
		// setup makes what is refused in base, and returns the turn's directory to open.
		setup func(base string) string
	}{
		{"a directory above writable by others", false, func(base string) string {
			os.MkdirAll(filepath.Join(base, "open", "turn_x"), 0o700)
			os.Chmod(filepath.Join(base, "open"), 0o777)
			return filepath.Join(base, "open", "turn_x")
		}},
		{"a directory above is a symlink", false, func(base string) string {
			os.MkdirAll(filepath.Join(base, "real", "turn_x"), 0o700)
			os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link"))
			return filepath.Join(base, "link", "turn_x")
		}},
		{"the turn's directory is a symlink", false, func(base string) string {
			os.MkdirAll(filepath.Join(base, "real"), 0o700)
			os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "turn_x"))
			return filepath.Join(base, "turn_x")
		}},
		{"the turn's directory is writable by group", false, func(base string) string {
			os.Mkdir(filepath.Join(base, "turn_x"), 0o770)
			os.Chmod(filepath.Join(base, "turn_x"), 0o770)
			return filepath.Join(base, "turn_x")
		}},
		{"the turn's directory belongs to another uid", true, func(base string) string {
			os.Mkdir(filepath.Join(base, "turn_x"), 0o700)
			os.Chown(filepath.Join(base, "turn_x"), 65534, 65534)
			return filepath.Join(base, "turn_x")
		}},
		{"a directory above belongs to another uid", true, func(base string) string {
			os.MkdirAll(filepath.Join(base, "theirs", "turn_x"), 0o700)
			os.Chown(filepath.Join(base, "theirs"), 65534, 65534)
			return filepath.Join(base, "theirs", "turn_x")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.rootOnly && !asRoot {
				t.Skip("SKIPPING: needs root to give a directory to another uid")
			}
			dir := c.setup(t.TempDir())
			if d, err := harness.OpenTurnDir(dir); !errors.Is(err, harness.ErrNotPrivate) {
				if d != nil {
					d.Close()
				}
				t.Errorf("OpenTurnDir: %v, want ErrNotPrivate", err)
			}
			if _, err := harness.MakeTurnDir(filepath.Dir(dir), "turn_y"); !strings.Contains(c.name, "turn's directory") && !errors.Is(err, harness.ErrNotPrivate) {
				t.Errorf("MakeTurnDir in it: %v, want ErrNotPrivate", err)
			}
		})
	}

	t.Run("a file in it is a symlink", func(t *testing.T) {
		dir, err := harness.MakeTurnDir(t.TempDir(), "turn_x")
		if err != nil {
			t.Fatal(err)
		}
		elsewhere := filepath.Join(t.TempDir(), "forged.json")
		os.WriteFile(elsewhere, []byte(`{"exit_code":0,"summary":{"result":"forged"}}`), 0o644)
		os.Symlink(elsewhere, filepath.Join(dir, harness.StatusFile))
		d, err := harness.OpenTurnDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var b bytes.Buffer
		if err := harness.ReadTurnFile(d, harness.StatusFile, 0, -1, &b); !errors.Is(err, harness.ErrNotPrivate) || b.Len() > 0 {
			t.Errorf("read through a symlinked status file: %q, %v; want nothing, ErrNotPrivate", b.String(), err)
		}
		if err := harness.AppendTurnFile(d, harness.StatusFile, []byte("x")); !errors.Is(err, harness.ErrNotPrivate) {
			t.Errorf("append through it: %v, want ErrNotPrivate", err)
		}
	})
}
