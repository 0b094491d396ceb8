package envd_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/envd"
)

// healthServer answers GET /health 503 to the first failures asks, then 204; asks counts them.
func healthServer(t *testing.T, failures int32, asks *atomic.Int32) *envd.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asks.Add(1) <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c, err := envd.New(envd.Config{URL: srv.URL, Protocol: envd.ProtocolHTTP1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// waitHealthy runs WaitHealthy on a mock clock, letting each poll's timer fire at once.
func waitHealthy(t *testing.T, c *envd.Client, w envd.Wait) error {
	t.Helper()
	ctx := testCtx(t, shortWait)
	clock := quartz.NewMock(t)
	w.Clock = clock
	trap := clock.Trap().NewTimer("envd", "health", "poll")
	defer trap.Close()
	done := make(chan error, 1)
	go func() { done <- c.WaitHealthy(ctx, w) }()
	for {
		select {
		case err := <-done:
			return err
		case call := <-trapped(ctx, trap):
			call.MustRelease(ctx)
			clock.Advance(w.Every).MustWait(ctx)
		}
	}
}

func trapped(ctx context.Context, trap *quartz.Trap) <-chan *quartz.Call {
	ch := make(chan *quartz.Call, 1)
	go func() {
		if call, err := trap.Wait(ctx); err == nil {
			ch <- call
		}
	}()
	return ch
}

func TestWaitHealthyAsksUntilAnswered(t *testing.T) {
	t.Parallel()
	var asks atomic.Int32
	c := healthServer(t, 2, &asks)
	if err := waitHealthy(t, c, envd.Wait{Timeout: time.Minute, Every: 50 * time.Millisecond}); err != nil {
		t.Fatalf("WaitHealthy: %v", err)
	}
	if n := asks.Load(); n != 3 {
		t.Errorf("asked /health %d times, want 3 (two 503s, then 204)", n)
	}
}

func TestWaitHealthyStopsWhenGone(t *testing.T) {
	t.Parallel()
	var asks atomic.Int32
	c := healthServer(t, 1000, &asks)
	gone := errors.New("the container exited")
	err := waitHealthy(t, c, envd.Wait{Timeout: time.Minute, Every: 50 * time.Millisecond,
		Gone: func(context.Context) error {
			if asks.Load() >= 2 {
				return gone
			}
			return nil
		}})
	if !errors.Is(err, gone) {
		t.Fatalf("WaitHealthy = %v, want Gone's error", err)
	}
}

func TestWaitHealthyTimesOut(t *testing.T) {
	t.Parallel()
	var asks atomic.Int32
	c := healthServer(t, 1000, &asks)
	err := waitHealthy(t, c, envd.Wait{Timeout: time.Second, Every: time.Second})
	if err == nil || !strings.Contains(err.Error(), "no answer in 1s") {
		t.Fatalf("WaitHealthy = %v, want no answer in 1s", err)
	}
}
