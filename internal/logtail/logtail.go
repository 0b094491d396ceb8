// Package logtail is `hangar tail`: it follows a file from an offset and writes what is
// appended to it to its stdout as soon as it is written, woken by inotify (fsnotify) rather
// than a timed poll. GNU `tail -F` treats overlayfs (a Docker container's root) as a remote
// file system and polls it, so each line waits up to its sleep interval; this follower does
// not. It runs in the sandbox, started through the daemon, and serve's turn watcher reads its
// output as the daemon streams it.
//
// It never tries to make sense of a file that changed under it: a file truncated, replaced or
// removed ends it with exit code 3 and a sentence on stderr, and its reader goes back to
// reading from its own saved position. With --until it also ends, exit code 0, once that file
// exists and everything written before it appeared was printed: a turn's follower ends with its
// turn (the harness writes the status file after the last line of the run log), even when
// nobody is left to stop it.
package logtail

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// ExitChanged is the exit code when the file was truncated, replaced or removed.
const ExitChanged = 3

// ErrChanged means the followed file is no longer the one being read from that offset.
var ErrChanged = errors.New("the file changed under the follower")

// ExitError is an error with the exit code the verb ends with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

const usage = `Follows FILE from an offset: hangar tail [-c +N] [--until FILE2] FILE
Writes FILE's bytes from offset N-1 (-c +N as in tail; default +1, the start), then each write
to it as soon as it is made (inotify, no polling interval). Ends with exit code 3 and a message
on stderr when FILE is truncated, replaced or removed; with exit code 0 once FILE2 exists and
FILE is printed to its end.`

// Main runs `hangar tail` with args (after the verb's name). It returns nil at --until's end,
// flag.ErrHelp for --help, an *ExitError (code 3) when the file changed, or another error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hangar tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
	from := fs.String("c", "+1", "start at byte N-1 of the file: +N")
	until := fs.String("until", "", "end once this file exists and the followed file is printed to its end")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("give exactly one file to follow")
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(*from, "+"), 10, 64)
	if err != nil || !strings.HasPrefix(*from, "+") || n < 1 {
		return fmt.Errorf("-c takes +N, N a byte position from 1, not %q", *from)
	}
	err = Follow(ctx, fs.Arg(0), n-1, *until, stdout)
	if errors.Is(err, ErrChanged) {
		return &ExitError{Code: ExitChanged, Err: err}
	}
	return err
}

// Follow writes path's bytes from offset to w, then each write to path as it is made, until
// ctx ends, until exists (when set: then it returns nil after printing path to its end), or
// path changes (an error wrapping ErrChanged). A failed write to w ends it too.
func Follow(ctx context.Context, path string, offset int64, until string, w io.Writer) error {
	// The watch comes first: a write after it and before a read still wakes the loop below.
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer watcher.Close()
	// The directory, not the file: it also reports the file's replacement and --until's file.
	if err := watcher.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watch %s: %w", filepath.Dir(path), err)
	}
	if until != "" && filepath.Dir(until) != filepath.Dir(path) {
		if err := watcher.Add(filepath.Dir(until)); err != nil {
			return fmt.Errorf("watch %s: %w", filepath.Dir(until), err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	t := &tailer{f: f, path: path, pos: offset, buf: make([]byte, 64<<10), w: w}
	for {
		// --until is looked at before the read: what was written before it appeared is then
		// all read by the read below.
		done := until != "" && exists(until)
		if err := t.copy(); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-watcher.Events:
			if !ok {
				return errors.New("the file watch closed")
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return errors.New("the file watch closed")
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) { // an overflow only means: read again
				return fmt.Errorf("watch %s: %w", path, err)
			}
		}
	}
}

// tailer reads the open file f from pos.
type tailer struct {
	f    *os.File
	path string
	pos  int64
	buf  []byte
	w    io.Writer
}

// copy writes what the file holds past pos, then checks it is still the file at path and no
// shorter than pos.
func (t *tailer) copy() error {
	for {
		n, err := t.f.ReadAt(t.buf, t.pos)
		if n > 0 {
			if _, werr := t.w.Write(t.buf[:n]); werr != nil {
				return fmt.Errorf("write: %w", werr)
			}
			t.pos += int64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", t.path, err)
		}
	}
	open, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", t.path, err)
	}
	now, err := os.Stat(t.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s was removed", ErrChanged, t.path)
	case err != nil:
		return fmt.Errorf("stat %s: %w", t.path, err)
	case !os.SameFile(open, now):
		return fmt.Errorf("%w: %s was replaced", ErrChanged, t.path)
	case open.Size() < t.pos:
		return fmt.Errorf("%w: %s was truncated (to %d bytes, followed to %d)", ErrChanged, t.path, open.Size(), t.pos)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
