// Package sqlite opens hangar's embedded store: one SQLite file through modernc.org/sqlite (no
// cgo), migrated at open.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/migrations"
)

// FileName is the database file's name inside the data directory.
const FileName = "hangar.db"

// Open opens (creating if needed) <dir>/hangar.db and applies the migrations, with the
// default Pool.
func Open(ctx context.Context, dir string) (*sqlstore.DB, error) {
	return OpenPool(ctx, dir, sqlstore.Pool{})
}

// OpenPool opens (creating if needed) <dir>/hangar.db and applies the migrations under a lock
// on <dir>/hangar.db.lock. SQLite has one writer at a time: hangar writes through one
// connection (a transaction takes the file's write lock when it begins, _txlock=immediate)
// and reads through pool.MaxConns others, which WAL mode lets read while it writes; a call
// waits for its connection up to pool.Wait.
func OpenPool(ctx context.Context, dir string, pool sqlstore.Pool) (*sqlstore.DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	// WAL lets readers go on while one writes; busy_timeout makes a writer wait for another
	// process's (another hangar on this file, a CLI) instead of failing with SQLITE_BUSY; this
	// one's writers queue for the one writer connection.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	if err := toWAL(ctx, path, dsn); err != nil {
		return nil, err
	}
	db, err := sqlstore.OpenDB("sqlite", dsn+"&_txlock=immediate", classify, sqlstore.StmtCacheSize)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// The readers may not write (query_only): a write sent to them by mistake fails, rather
	// than taking the lock beside the writer.
	readers, err := sqlstore.OpenDB("sqlite", dsn+"&_pragma=query_only(1)", classify, sqlstore.StmtCacheSize)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		db.Close()
		readers.Close()
		return nil, err
	}
	s, err := sqlstore.OpenSplit(ctx, db, readers, sqlstore.Dialect{Goose: goose.DialectSQLite3, IsUniqueViolation: isUniqueViolation,
		Locker: &fileLocker{path: path + ".lock"}}, fsys, pool)
	if err != nil {
		db.Close()
		readers.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// toWAL turns a new database file to WAL mode under the migrations' lock (fileLocker), one
// open at a time. The switch wants the file to itself, and SQLite answers a switch beside
// another connection's write (the journal_mode pragma each connection sends as it connects)
// with SQLITE_BUSY at once, without waiting busy_timeout: two first opens of one new data
// directory failed so, now and then. Once the file is in WAL mode, the pragma changes nothing
// and waits like any reader.
func toWAL(ctx context.Context, path, dsn string) error {
	lock := &fileLocker{path: path + ".lock"}
	if err := lock.SessionLock(ctx, nil); err != nil {
		return err
	}
	defer lock.SessionUnlock(ctx, nil)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil { // connecting sends the pragmas, WAL's among them
		return fmt.Errorf("open %s: %w", path, classify(err))
	}
	return nil
}

// privateFiles creates the database file at path, readable and writable by its owner only
// whatever the umask, and tightens an older one and its -wal and -shm files to 0600. SQLite
// gives the -wal and -shm files it creates the database file's mode.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("open %s: not a regular file", p)
		}
		if fi.Mode().Perm() != 0o600 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("make %s private (chmod 0600): %w", p, err)
			}
		}
	}
	return nil
}

// classify wraps SQLite's "disk full" in store.ErrFull, and its "busy" and "locked" (a writer
// held the database past busy_timeout), "cannot open" and I/O errors in store.ErrUnavailable.
func classify(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("%w: %w", store.ErrFull, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	return store.Unavailable(err)
}

func isUniqueViolation(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
