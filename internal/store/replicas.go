package store

import (
	"context"
	"time"
)

// ReplicaStore is what several replicas on one database read of each other's work
// (docs/replicas.md): the processes that other replicas follow.
type ReplicaStore interface {
	// ListUserProcesses lists user's processes whose record says they run, or that ended at
	// or after since, oldest first.
	ListUserProcesses(ctx context.Context, user string, since time.Time) ([]Process, error)
}
