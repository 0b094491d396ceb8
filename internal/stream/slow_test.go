package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coder/quartz"
)

// TestSlowTriggers: each way of finding a client slow ends its stream with the one close
// reason clients see, slow, and is counted under its own trigger; a full queue whose writer
// still takes is the output's doing (limit) and no trigger's.
func TestSlowTriggers(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg    Config
		end    func(t *testing.T, env slowEnv, s *Stream)
		reason Reason
		want   SlowTrigger // "": no trigger counted
	}{
		"a full queue, the writer idle for SlowIdle": {
			cfg: Config{QueueBytes: 1 << 10, SlowIdle: 10 * time.Second},
			end: func(_ *testing.T, env slowEnv, s *Stream) {
				env.clk.Advance(10 * time.Second)
				fill(s)
			},
			reason: ReasonSlow, want: SlowQueueFull,
		},
		"a full queue, the writer idle for less than SlowIdle": {
			cfg: Config{QueueBytes: 1 << 10, SlowIdle: 10 * time.Second},
			end: func(_ *testing.T, env slowEnv, s *Stream) {
				env.clk.Advance(9 * time.Second)
				fill(s)
			},
			reason: ReasonLimit,
		},
		"a producer waiting for room for Stall": {
			cfg: Config{QueueBytes: 1 << 10, Stall: 30 * time.Second},
			end: func(t *testing.T, env slowEnv, s *Stream) {
				trap := env.clk.Trap().NewTimer("queue", "stall")
				defer trap.Close()
				done := make(chan struct{})
				go func() {
					defer close(done)
					for s.SendWait(context.Background(), Item{Data: make([]byte, 100)}) {
					}
				}()
				fire(t, env.clk, nextCall(t, trap, done))
				<-done
			},
			reason: ReasonSlow, want: SlowStall,
		},
		"a write that missed its deadline": {
			end: func(t *testing.T, env slowEnv, s *Stream) {
				rec := newRecorder(false)
				rec.err = func() error { s.EndSlow(SlowWriteTimeout); return errors.New("write: i/o timeout") }
				done := startRender(t, s, env.idle, rec.write)
				s.SendWait(context.Background(), Item{Data: []byte("x")})
				<-done
			},
			reason: ReasonSlow, want: SlowWriteTimeout,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := newClock(t)
			env := slowEnv{clk: clk, idle: trap(t, clk.Trap().NewTimer("stream", "idle"))}
			tc.cfg.Clock = clk
			r, reg := newRegistry(t, tc.cfg)
			s := open(t, r, Options{Kind: KindExec, Unpaced: true})
			tc.end(t, env, s)
			s.Close()
			if s.Reason() != tc.reason {
				t.Fatalf("reason %q, want %q", s.Reason(), tc.reason)
			}
			for _, trigger := range []SlowTrigger{SlowQueueFull, SlowStall, SlowWriteTimeout} {
				want := 0.0
				if trigger == tc.want {
					want = 1
				}
				if got := testutil.ToFloat64(r.m.slow.WithLabelValues("exec", string(trigger))); got != want {
					t.Errorf(`hangar_stream_slow{kind="exec",trigger=%q} = %v, want %v`, trigger, got, want)
				}
			}
			if n, _ := testutil.GatherAndCount(reg, "hangar_stream_slow"); n != 3 {
				t.Errorf("hangar_stream_slow is not exported (%d series)", n)
			}
		})
	}
}

type slowEnv struct {
	clk  *quartz.Mock
	idle *trapOf // the writer's idle timer, for startRender
}

// fill Sends until the stream refuses.
func fill(s *Stream) {
	for i := 0; i < 100 && s.Send(Item{Data: make([]byte, 100)}); i++ {
	}
}

// TestEndSlowFirstReasonWins: a stream already ended is not counted slow by a later EndSlow.
func TestEndSlowFirstReasonWins(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{})
	s := open(t, r, Options{Kind: KindExec})
	s.End(ReasonClient)
	s.EndSlow(SlowWriteTimeout)
	s.Close()
	if s.Reason() != ReasonClient {
		t.Fatalf("reason %q, want client", s.Reason())
	}
	if got := testutil.ToFloat64(r.m.slow.WithLabelValues("exec", string(SlowWriteTimeout))); got != 0 {
		t.Fatalf("a stream ended client was counted slow (%v)", got)
	}
}
