package replicas

import (
	"context"
	"sync"
	"testing"
	"time"
)

// heard collects what a Cluster's handlers heard, and signals each.
type heard struct {
	mu      sync.Mutex
	args    []string
	resyncs int
	ch      chan struct{}
}

func newHeard() *heard { return &heard{ch: make(chan struct{}, 100)} }

func (h *heard) handle(_ context.Context, arg string) {
	h.mu.Lock()
	h.args = append(h.args, arg)
	h.mu.Unlock()
	h.ch <- struct{}{}
}

func (h *heard) resync(context.Context) {
	h.mu.Lock()
	h.resyncs++
	h.mu.Unlock()
	h.ch <- struct{}{}
}

// wait waits until cond holds, woken by each thing heard.
func (h *heard) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// run runs c until the test ends.
func run(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestNotifyAndResync: a replica's notification reaches the other's handler (never its own);
// when the listening connection is cut, the replica reconnects and resyncs (its readers read
// the rows again), and hears notifications again.
func TestNotifyAndResync(t *testing.T) {
	t.Parallel()
	_, a, b, _, _, _ := newPair(t)
	ha, hb := newHeard(), newHeard()
	a.Handle("events", ha.handle)
	a.OnResync(ha.resync)
	b.Handle("events", hb.handle)
	b.OnResync(hb.resync)
	run(t, a)
	run(t, b)
	hb.wait(t, "b listening", func() bool { return hb.resyncs == 1 })
	ha.wait(t, "a listening", func() bool { return ha.resyncs == 1 })

	a.Publish(context.Background(), "events", "ses_1 job_1")
	hb.wait(t, "b to hear a's notification", func() bool { return len(hb.args) == 1 })
	if hb.args[0] != "ses_1 job_1" {
		t.Errorf("b heard %q", hb.args[0])
	}

	// Cut b's listening connection, as a network break or a database restart would.
	if _, err := a.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+quoted(b.channel)); err != nil {
		t.Fatal(err)
	}
	// Both were listening on the channel: both reconnect and resync.
	hb.wait(t, "b to listen again", func() bool { return hb.resyncs == 2 })
	a.Publish(context.Background(), "events", "ses_2")
	hb.wait(t, "b to hear a's next notification", func() bool { return len(hb.args) == 2 })
	ha.mu.Lock()
	defer ha.mu.Unlock()
	if len(ha.args) != 0 {
		t.Errorf("a heard its own notifications: %v", ha.args)
	}
}

func quoted(s string) string { return `"` + s + `"` }
