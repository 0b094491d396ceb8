// Package names holds the rules for what hangar is given to name and run things with: a
// sandbox's or a session's name (the providers use it in folder, container and pod names; auth
// for tokens bound to a sandbox), and the environment, paths and command lines of the processes
// a sandbox runs, which the kernel bounds. It imports nothing of hangar's, so any package may
// use it.
package names

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckSandbox reports whether name can name a sandbox: a lowercase DNS label (RFC 1123) of at
// most 63 characters, so every provider can use it in folder, container and pod names.
func CheckSandbox(name string) error { return CheckLabel("sandbox name", name) }

// CheckLabel reports whether name is a lowercase DNS label (RFC 1123) of at most 63 characters,
// the rule of every name hangar gives things (sandboxes, sessions); what says which name it is,
// for the error.
func CheckLabel(what, name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("%s %.70q: must be 1 to 63 characters", what, name)
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("%s %q: must be lowercase letters, digits and inner dashes", what, name)
		}
	}
	return nil
}

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
