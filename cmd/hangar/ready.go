package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hangar-dev/hangar/internal/store"
)

// diskProbeBytes is what /readyz writes into the data directory each time it is asked: enough
// to need fresh blocks (a page of SQLite's is 4 KiB), little enough to cost nothing.
const diskProbeBytes = 64 << 10

// readiness is /readyz's check: the store answers its ping, and the data directory takes a
// small write (SQLite's file, local sandboxes and hangar's secrets live there; a full disk
// leaves a ping answering while every write fails). A full disk is store.ErrFull, a store
// that does not answer store.ErrUnavailable, so /readyz says which. A store whose every
// connection is in use (store.ErrBusy) is ready: that is load, which every replica on the
// database shares, not a fault that taking this one out of rotation would mend — its
// requests meanwhile wait their turn or get 503 with Retry-After.
func readiness(st store.Store, dataDir string) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := st.Ping(ctx); err != nil && !errors.Is(err, store.ErrBusy) {
			return store.Unavailable(fmt.Errorf("ping the store: %w", err))
		}
		return probeDisk(dataDir)
	}
}

// probeDisk writes diskProbeBytes to a file in dir, syncs it and removes it.
func probeDisk(dir string) error {
	f, err := os.CreateTemp(dir, ".readyz-probe-*")
	if err != nil {
		return store.Unavailable(fmt.Errorf("write to the data directory %s: %w", dir, err))
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, diskProbeBytes))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return store.Unavailable(fmt.Errorf("write to the data directory %s: %w", filepath.Clean(dir), err))
	}
	return nil
}
