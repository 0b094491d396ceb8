package envd

import (
	"context"
	"fmt"
	"time"

	"github.com/coder/quartz"
)

// Wait says how WaitHealthy waits for a daemon to come up.
type Wait struct {
	// Timeout bounds the whole wait. Required (> 0).
	Timeout time.Duration
	// Every is the time between two asks. Required (> 0).
	Every time.Duration
	// Ask bounds each ask (0: only Timeout does), so that a daemon that took the connection
	// and never answers is asked again.
	Ask time.Duration
	// Gone, when set, is asked after each failed ask whether the daemon can still come up
	// (its container runs, its process lives); its error ends the wait.
	Gone func(ctx context.Context) error
	// Clock times the wait. Nil: the real clock.
	Clock quartz.Clock
}

// WaitHealthy asks the daemon's GET /health (Health) until it answers, w.Gone says it never
// will, or w.Timeout passes (an error naming the timeout and the last answer): the one health
// wait of the providers.
func (c *Client) WaitHealthy(ctx context.Context, w Wait) error {
	clock := w.Clock
	if clock == nil {
		clock = quartz.NewReal()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := clock.AfterFunc(w.Timeout, cancel, "envd", "health", "timeout")
	defer deadline.Stop()
	for {
		err := c.ask(ctx, w.Ask)
		if err == nil {
			return nil
		}
		if w.Gone != nil {
			if gerr := w.Gone(ctx); gerr != nil {
				return gerr
			}
		}
		t := clock.NewTimer(w.Every, "envd", "health", "poll")
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("no answer in %s: %w", w.Timeout, err)
		case <-t.C:
		}
	}
}

// ask is one Health, bounded by d (0: not).
func (c *Client) ask(ctx context.Context, d time.Duration) error {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return c.Health(ctx)
}
