package daemon

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
)

// TestStarterQueueIsSmall: the client that started a process waits for its output with a
// queue of StarterQueueBytes (1 MiB: the process waits past it, so a process that writes faster
// than its client reads costs the daemon at most that), an attached client with one of
// SubscriberQueueBytes (16 MiB: it is ended past it, so it gets room for bursts).
func TestStarterQueueIsSmall(t *testing.T) {
	t.Parallel()
	d := New(Config{})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := envd.New(envd.Config{URL: srv.URL, Protocol: envd.ProtocolHTTP1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	started, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	attached, err := c.Connect(ctx, envd.ByPID(started.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer attached.Close()

	ps := d.procs.list()
	if len(ps) != 1 {
		t.Fatalf("%d processes running, want 1", len(ps))
	}
	p := ps[0]
	p.mu.Lock()
	var limits []int64
	for q := range p.subs {
		limits = append(limits, q.q.Limit())
	}
	p.mu.Unlock()
	slices.Sort(limits)
	if want := []int64{DefaultStarterQueueBytes, DefaultSubscriberQueueBytes}; !slices.Equal(limits, want) {
		t.Errorf("subscribers' queue bounds = %v, want %v (the starter's, an attached client's)", limits, want)
	}
}
