// Package streamtest has fakes for the tests of stream and of the packages that count streams
// as it does (watch).
package streamtest

import (
	"context"
	"sync"
)

// Counts is a fake of the replicas' shared counts (stream.SharedCounts), on one replica: what
// it starts with stands for what the other replicas hold.
type Counts struct {
	mu   sync.Mutex
	open map[string]int // open streams by key, here and on the other replicas
}

// NewCounts is a Counts where open is held already (by other replicas).
func NewCounts(open map[string]int) *Counts {
	return &Counts{open: open}
}

// Take counts one more under key, unless max are open already.
func (c *Counts) Take(_ context.Context, key string, max int) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[key] >= max {
		return false, nil
	}
	c.open[key]++
	return true, nil
}

// Give counts one fewer under key.
func (c *Counts) Give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[key]--
}

// Of is how many are open under key.
func (c *Counts) Of(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[key]
}
