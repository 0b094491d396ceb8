package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
)

func TestDead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		dead bool
	}{
		{nil, false},
		{auth.ErrRevoked, true},
		{auth.ErrExpired, true},
		{auth.ErrUnknownToken, true},
		{fmt.Errorf("check: %w", auth.ErrRevoked), true},
		{auth.ErrNoToken, false},
		{errors.New("the store did not answer"), false},
	} {
		if got := auth.Dead(tc.err); got != tc.dead {
			t.Errorf("Dead(%v) = %v, want %v", tc.err, got, tc.dead)
		}
	}
}

// TestRechecks: each round checks each distinct token once, and only a dead one is reported; a
// store that does not answer ends nothing.
func TestRechecks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := quartz.NewMock(t)
	verdicts := map[string]error{"ok": nil, "gone": auth.ErrRevoked, "down": errors.New("store down")}
	var mu sync.Mutex
	checked := map[string]int{}
	deaths := make(chan string, 10)
	r := auth.Rechecks{Every: 5 * time.Second, Clock: clock, Tags: []string{"test", "recheck"},
		Check: func(_ context.Context, p auth.Principal) error {
			mu.Lock()
			defer mu.Unlock()
			checked[p.TokenID]++
			return verdicts[p.TokenID]
		}}
	tokens := func() []auth.Principal {
		return []auth.Principal{{TokenID: "ok"}, {TokenID: "gone"}, {TokenID: "gone"}, {TokenID: "down"}, {}}
	}
	trap := clock.Trap().NewTicker("test", "recheck")
	defer trap.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, tokens, func(_ context.Context, id string) { deaths <- id })
	}()
	trap.MustWait(ctx).MustRelease(ctx)
	clock.Advance(5 * time.Second).MustWait(ctx)
	if id := <-deaths; id != "gone" {
		t.Fatalf("dead token %q, want gone", id)
	}
	cancel()
	<-done
	if len(deaths) != 0 {
		t.Errorf("more tokens reported dead: %q", <-deaths)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"ok", "gone", "down"} {
		if checked[id] != 1 {
			t.Errorf("token %q checked %d times in one round, want once", id, checked[id])
		}
	}
	if checked[""] != 0 {
		t.Errorf("hangar's own streams (no token) were checked")
	}
}
