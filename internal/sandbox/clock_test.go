package sandbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/sandbox"
)

// TestExecTimeoutOnTheClock: an exec's timeout is the Manager's clock's. Its daemon would kill
// the command in an hour of real time; once the mock clock passes the hour and the kill grace,
// hangar stops waiting, kills the command and reports it timed out.
func TestExecTimeoutOnTheClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	clock := quartz.NewMock(t)
	timeouts := clock.Trap().AfterFunc("sandbox", "exec", "timeout")
	defer timeouts.Close()
	e := newExecEnvOn(t, clock)
	sb, err := e.m.Lookup(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res sandbox.ExecResult
		err error
	}
	ran := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		var once sync.Once
		res, err := e.m.ExecStream(ctx, sb, sandbox.ExecRequest{Command: "echo started; exec sleep 600", Timeout: time.Hour},
			func(string, []byte) { once.Do(func() { close(started) }) })
		ran <- result{res, err}
	}()
	call := timeouts.MustWait(ctx)
	if call.Duration <= time.Hour {
		t.Errorf("timer of %s, want the timeout and a grace", call.Duration)
	}
	call.MustRelease(ctx)
	select {
	case <-started:
	case r := <-ran:
		t.Fatalf("the exec ended before its timeout: %+v, %v", r.res, r.err)
	}
	clock.Advance(call.Duration).MustWait(ctx)
	select {
	case r := <-ran:
		if r.err != nil || !r.res.TimedOut || r.res.ExitCode != -1 {
			t.Errorf("exec = %+v, %v; want timed out, exit -1", r.res, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the exec did not end when the clock passed its timeout")
	}
}
