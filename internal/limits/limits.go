// Package limits holds what the kernel bounds in what hangar is given to run processes with in a
// sandbox: their environment, paths and command lines (the sandbox, process, turns and watch
// services check what they are asked with it); and the bounds of hangar's and hangar-envd's
// own processes: their open files (nofile.go) and their heap's growth between collections
// (heap.go). It imports nothing of hangar's, so any package may use it.
package limits

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxEnvEntry is the longest NAME=value an environment may hold: Linux bounds each string a
// process starts with at 128 KiB, its ending NUL included (MAX_ARG_STRLEN).
const MaxEnvEntry = 128<<10 - 1

// CheckEnv reports what in env no process could be started with: a name that is empty or holds
// '=' or a NUL byte, a value that holds a NUL byte, or an entry longer than MaxEnvEntry.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("environment variable name %q: must be non-empty, without '=' or NUL", k)
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("environment variable %s: its value holds a NUL character", k)
		case len(k)+1+len(v) > MaxEnvEntry:
			return fmt.Errorf("environment variable %s: %d bytes with its name; at most %d (128 KiB) fit in a process's environment", k, len(k)+1+len(v), MaxEnvEntry)
		}
	}
	return nil
}

// CheckPath reports what in path no file system call could take: a NUL byte, more than 4095
// bytes (Linux's PATH_MAX, with the ending NUL), or a name in it of more than 255 bytes
// (NAME_MAX); and what the daemon's protocol cannot carry: bytes that are not UTF-8 (its paths
// are protobuf strings, which must be; e.g. a query's %ff).
func CheckPath(path string) error {
	switch {
	case strings.ContainsRune(path, 0):
		return fmt.Errorf("path %.60q: holds a NUL character", path)
	case !utf8.ValidString(path):
		return fmt.Errorf("path %.60q: is not UTF-8 text, which a path in a sandbox must be", path)
	case len(path) > 4095:
		return fmt.Errorf("path %.60q…: %d bytes; a path is at most 4095", path, len(path))
	}
	for name := range strings.SplitSeq(path, "/") {
		if len(name) > 255 {
			return fmt.Errorf("path %.60q…: a name in it is %d bytes; at most 255", path, len(name))
		}
	}
	return nil
}

// CheckCommand reports what in a shell command line no process could be started with: a NUL
// byte.
func CheckCommand(cmd string) error {
	if strings.ContainsRune(cmd, 0) {
		return fmt.Errorf("the command holds a NUL character, which no command line can")
	}
	return nil
}
