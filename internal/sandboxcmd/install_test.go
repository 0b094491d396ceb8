package sandboxcmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestInstall(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, not a copy of the running executable (%d bytes)", path, len(got), len(want))
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", path, fi.Mode().Perm())
		}
		// Nothing but the installed file is left beside it (no temporary copy).
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("%s holds %d entries, want only %s", filepath.Dir(path), len(entries), filepath.Base(path))
		}
	}

	t.Run("to a file", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "hangar-envd")
		if err := Install(context.Background(), "install", []string{dest}, io.Discard, io.Discard); err != nil {
			t.Fatalf("install %s: %v", dest, err)
		}
		check(t, dest)
	})
	t.Run("over an existing file", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "hangar-envd")
		if err := os.WriteFile(dest, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Install(context.Background(), "install", []string{dest}, io.Discard, io.Discard); err != nil {
			t.Fatalf("install %s: %v", dest, err)
		}
		check(t, dest)
	})
	t.Run("into a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := Install(context.Background(), "install", []string{dir}, io.Discard, io.Discard); err != nil {
			t.Fatalf("install %s: %v", dir, err)
		}
		check(t, filepath.Join(dir, filepath.Base(exe)))
	})
}

func TestInstallErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "hangar-envd")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no destination", nil},
		{"two destinations", []string{"a", "b"}},
		{"empty destination", []string{""}},
		{"missing directory", []string{missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Install(context.Background(), "install", tc.args, io.Discard, io.Discard); err == nil {
				t.Errorf("install %q: no error", tc.args)
			}
		})
	}
}
