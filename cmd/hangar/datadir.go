package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hangar-dev/hangar/internal/harness"
)

// dataDirMode is the data directory's mode: its database keeps sessions' (sealed) env and
// tokens' hashes, its secret file keys process tags and sealed env, its admin-token file is an
// admin's token, and local sandboxes' folders are in it. Nobody but hangar's user reads any of it.
const dataDirMode = 0o700

// secureDataDir makes dir (mode 0700) or, when it exists, checks that it is a directory and
// tightens it to 0700 when others may enter it, saying so in the log. A directory hangar cannot
// tighten (a volume's mount point of another owner, as Kubernetes mounts them) is used with a
// warning: the files hangar makes in it are 0600 all the same.
func secureDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, dataDirMode); err != nil {
		return fmt.Errorf("create data dir %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory (a symlink is not followed: give the real path)", dir)
	}
	if fi.Mode().Perm() == dataDirMode {
		return nil
	}
	was := fmt.Sprintf("%04o", fi.Mode().Perm())
	if err := os.Chmod(dir, dataDirMode); err != nil {
		owner := -1
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner = int(st.Uid)
		}
		log.Warn("the data dir is open to other users and hangar cannot make it private; its files are readable by hangar's user only",
			"dir", dir, "mode", was, "owner_uid", owner, "err", err)
		return nil
	}
	log.Warn("the data dir was open to other users: made it private", "dir", dir, "was", was, "now", "0700")
	return nil
}

// resolveDataDir makes dir (0700) if it is not there and returns its real path: absolute, every
// symlink on the way resolved, since sandboxes' daemons run in other working directories and
// local turns' directories are walked from / without following one. With the local provider,
// it checks once that local turns can be made under it (harness.CheckAbove): every directory
// down to it root's or hangar's user's and writable by no other, or every local turn would
// fail as not hangar's alone.
func resolveDataDir(dir string, local bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, dataDirMode); err != nil {
		return "", fmt.Errorf("create data dir %s: %w", abs, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", abs, err)
	}
	if !local {
		return real, nil
	}
	if err := harness.CheckAbove(real); err != nil {
		return "", fmt.Errorf("data dir %s: the local provider's turns could not run under it (%w): give a data dir whose every directory, down to it, is root's or this user's and writable by nobody else (HANGAR_DATA_DIR), or turn the local provider off (HANGAR_LOCAL_PROVIDER=false)", real, err)
	}
	return real, nil
}

// privateFile makes an existing file at path readable and writable by its owner only; a file
// that is not there is no error.
func privateFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if fi.Mode().Type() != 0 || fi.Mode().Perm() == 0o600 {
		return nil
	}
	return os.Chmod(path, fs.FileMode(0o600))
}
