package harness

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A turn's directory holds its prompt, its run log (hangar's copy of what the agent printed),
// its status file (how the turn ended, which alone decides its outcome) and harness.err. Only
// hangar's own code in the sandbox makes it and touches it, never a shell: MakeTurnDir makes it,
// OpenTurnDir opens it for the harness and for each read the control plane makes through the
// daemon. Both walk the path from / one component at a time (openat with O_NOFOLLOW: no symlink
// anywhere) and check each directory they pass as they hold it open — not a check and then a
// use by name — so nothing another uid controls can stand in for a part of it:
//
//   - every directory on the way is root's or this process's uid's, and writable by neither
//     group nor others unless sticky (as /tmp: there nobody renames what they do not own);
//   - the turn's directory itself, and the root MakeTurnDir makes it in, are this uid's and
//     writable by it alone; MakeTurnDir makes both 0700, and a turn's directory that exists
//     already is refused;
//   - a file in it is opened without following a symlink, and must be a regular file of this
//     uid's.
//
// A split turn's agent runs as another uid: it can neither enter nor replace any of it. A
// plain turn's agent runs as this uid and is trusted as before (it could always write its
// own status); a split agent in the same sandbox cannot reach it either.

// ErrNotPrivate means a turn's directory, or a directory above it, or a file in it, is not
// hangar's alone: another uid could write, replace or redirect what the turn's outcome is read
// from. The turn fails rather than trust it.
var ErrNotPrivate = errors.New("not hangar's alone")

// Turn files, in a turn's directory.
const (
	PromptFile  = "prompt"
	RunLogFile  = "run.log"
	StatusFile  = "status.json"
	HarnessErr  = "harness.err"
	turnDirMode = 0o700
	// parentMode is the mode of a directory MakeTurnDir makes above the root (/var/lib/hangar).
	parentMode = 0o755
)

// DefaultTurnRoot is where turns' directories go when the control plane names no root: for
// root, /var/lib/hangar/turns, which no other uid can make first; for another uid (a sandbox
// whose commands do not run as root, where no split agent runs), /tmp/hangar-turns-<uid>, which
// another uid can make first in /tmp — then MakeTurnDir refuses it (not this uid's) and the turn
// fails, rather than use it.
func DefaultTurnRoot() string {
	if uid := os.Geteuid(); uid != 0 {
		return "/tmp/hangar-turns-" + strconv.Itoa(uid)
	}
	return "/var/lib/hangar/turns"
}

// MakeTurnDir makes the directory id in root (root and what is missing above it too) and
// returns its path. root must be absolute; id one path component.
func MakeTurnDir(root, id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", fmt.Errorf("make turn directory: %q is not a name", id)
	}
	r, err := walk(root, true, false)
	if err != nil {
		return "", fmt.Errorf("make turn directory: %w", err)
	}
	defer r.Close()
	if err := unix.Mkdirat(int(r.Fd()), id, turnDirMode); err != nil {
		return "", fmt.Errorf("make turn directory %s: %w", filepath.Join(root, id), err)
	}
	d, err := openDirAt(r, id, false)
	if err != nil {
		return "", fmt.Errorf("make turn directory %s: %w", filepath.Join(root, id), err)
	}
	d.Close()
	return filepath.Join(filepath.Clean(root), id), nil
}

// OpenTurnDir opens a turn's directory, checking it and every directory above it.
func OpenTurnDir(dir string) (*os.File, error) {
	d, err := walk(dir, false, false)
	if err != nil {
		return nil, fmt.Errorf("open turn directory: %w", err)
	}
	return d, nil
}

// CheckAbove checks dir, which must exist, and every directory above it as MakeTurnDir checks
// those above a turns' root (no symlink; root's or this uid's; writable by no other unless
// sticky), so a caller that puts turns' roots under dir (the local provider, under the data
// dir) learns once, at start, that they could never be made there. ErrNotPrivate when one is
// not so.
func CheckAbove(dir string) error {
	d, err := walk(dir, false, true)
	if err != nil {
		return err
	}
	return d.Close()
}

// walk opens dir (absolute) from /, one component at a time, without following a symlink,
// checking each directory as it holds it (see above). With make, components that are missing
// are made: the last 0700, those above it 0755; an existing last one of this uid's that is
// not private yet (an earlier hangar made it 0755) is made so. With above, the last one is
// checked as one above a turn's directory.
func walk(dir string, make, above bool) (*os.File, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%q: not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	cur, err := os.OpenFile("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := checkDir(cur, "/", true); err != nil {
		cur.Close()
		return nil, err
	}
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	if dir == "/" {
		parts = nil
	}
	at := "/"
	for i, name := range parts {
		last := i == len(parts)-1
		at = filepath.Join(at, name)
		next, err := openDirAt(cur, name, !last || above)
		if errors.Is(err, unix.ENOENT) && make {
			mode := uint32(parentMode)
			if last {
				mode = turnDirMode
			}
			if err := unix.Mkdirat(int(cur.Fd()), name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				cur.Close()
				return nil, fmt.Errorf("make %s: %w", at, err)
			}
			next, err = openDirAt(cur, name, !last)
		}
		cur.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if last && make {
			if err := privatize(next); err != nil {
				next.Close()
				return nil, fmt.Errorf("%s: %w", at, err)
			}
		}
		cur = next
	}
	return cur, nil
}

// openDirAt opens the directory name in dir without following a symlink, and checks it.
func openDirAt(dir *os.File, name string, above bool) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: not a directory, or a symlink", ErrNotPrivate)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if err := checkDir(f, name, above); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkDir checks a directory held open: above the turn's directory (or its root), root's or
// this uid's, not writable by group or others unless sticky; the turn's directory, or the root
// being made, this uid's, not writable by group or others.
func checkDir(f *os.File, name string, above bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Uid != uid && (!above || st.Uid != 0):
		return fmt.Errorf("%w: it belongs to uid %d, not %d", ErrNotPrivate, st.Uid, uid)
	case st.Mode&0o022 != 0 && !(above && st.Mode&unix.S_ISVTX != 0):
		return fmt.Errorf("%w: it is writable by group or others (mode %#o)", ErrNotPrivate, st.Mode&0o7777)
	}
	return nil
}

// privatize makes a directory of this uid's, held open, 0700 if it is not yet.
func privatize(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&0o077 == 0 {
		return nil
	}
	// fchmod does not take an O_PATH descriptor; the one in /proc/self/fd names this very
	// directory, whatever its path has become.
	return os.Chmod("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), turnDirMode)
}

// openFileAt opens name in the turn's directory dir with flags (O_NOFOLLOW added) and checks it:
// a regular file of this uid's.
func openFileAt(dir *os.File, name string, flags int, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: %w: a symlink", name, ErrNotPrivate)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file of uid %d", name, ErrNotPrivate, os.Geteuid())
	}
	return f, nil
}

// OpenTurnFile opens name in the turn's directory dir to read it.
func OpenTurnFile(dir *os.File, name string) (*os.File, error) {
	return openFileAt(dir, name, unix.O_RDONLY, 0)
}

// OpenTurnFileAppend opens name in the turn's directory dir to append to it, making it (0600)
// if it is not there.
func OpenTurnFileAppend(dir *os.File, name string) (*os.File, error) {
	return openFileAt(dir, name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, 0o600)
}

// AppendTurnFile appends data to name in the turn's directory dir, making it (0600) if it is
// not there.
func AppendTurnFile(dir *os.File, name string, data []byte) error {
	f, err := OpenTurnFileAppend(dir, name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteTurnFile writes name in the turn's directory dir atomically: a new file in the same
// directory, synced, then renamed over name.
func WriteTurnFile(dir *os.File, name string, data []byte) error {
	tmp := "." + name + "." + strings.ToLower(rand.Text()[:10])
	f, err := openFileAt(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name)
	}
	if err != nil {
		unix.Unlinkat(int(dir.Fd()), tmp, 0)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReadTurnFile copies name in the turn's directory dir to w, from offset on, limit bytes at
// most (limit < 0: all). A missing file is an error wrapping fs.ErrNotExist.
func ReadTurnFile(dir *os.File, name string, offset, limit int64, w io.Writer) error {
	f, err := OpenTurnFile(dir, name)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = io.NewSectionReader(f, offset, 1<<62)
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	_, err = io.Copy(w, r)
	return err
}
