package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileLocker is goose's session lock for SQLite, which has none of its own: an exclusive
// flock(2) on a file beside the database, held while the migrations are applied. Two hangars
// (or two opens in one) on one data directory so migrate it once: the later one waits, then
// finds nothing to do. The kernel releases the lock of a process that dies.
type fileLocker struct {
	path string
	f    *os.File // open while the lock is held
}

// lockPoll is how often a waiting open tries the lock again; migrations take well under a
// second, and flock cannot wait on a context.
const lockPoll = 20 * time.Millisecond

// lockWait bounds the wait for another hangar's migrations.
const lockWait = 5 * time.Minute

func (l *fileLocker) SessionLock(ctx context.Context, _ *sql.Conn) error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the migration lock %s: %w", l.path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			l.f = f
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return fmt.Errorf("lock %s for the migrations: %w", l.path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("wait for another hangar's migrations of this data directory (%s held for %v): %w", l.path, lockWait, ctx.Err())
		case <-tick.C:
		}
	}
}

func (l *fileLocker) SessionUnlock(context.Context, *sql.Conn) error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
