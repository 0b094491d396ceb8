package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
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
