// Package sqlitetest opens SQLite stores for tests without migrating each one: the migrations
// run once per test process, on a template whose file each new store starts from.
package sqlitetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// template is the migrated template database's file, made once per process.
var template struct {
	once sync.Once
	b    []byte
	err  error
}

// Open is sqlite.Open for tests. A data directory without a database gets a copy of a template
// that sqlite.Open migrated once in this process, so Open finds nothing left to apply; a
// directory that has one is opened as it is.
func Open(ctx context.Context, dir string) (*sqlstore.DB, error) {
	template.once.Do(func() { template.b, template.err = migrated(ctx) })
	if template.err != nil {
		return nil, template.err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", dir, err)
	}
	if err := copyNew(filepath.Join(dir, sqlite.FileName), template.b); err != nil {
		return nil, err
	}
	return sqlite.Open(ctx, dir)
}

// copyNew writes b to path unless a file is there already.
func copyNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("copy the template database to %s: %w", path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy the template database to %s: %w", path, err)
	}
	return nil
}

// migrated opens a new store with sqlite.Open, which migrates it, and returns a consistent
// copy of its file: VACUUM INTO writes one file holding every committed page, whatever is
// still in the write-ahead log.
func migrated(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hangar-sqlitetest-")
	if err != nil {
		return nil, fmt.Errorf("make the template database: %w", err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("make the template database: %w", err)
	}
	defer s.Close()
	out := filepath.Join(dir, "template.db")
	if err := vacuumInto(ctx, filepath.Join(dir, sqlite.FileName), out); err != nil {
		return nil, fmt.Errorf("make the template database: %w", err)
	}
	return os.ReadFile(out)
}

func vacuumInto(ctx context.Context, from, to string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: from}).EscapedPath())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, to)
	return err
}
