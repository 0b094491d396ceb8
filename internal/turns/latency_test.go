package turns

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/stream"
)

// BenchmarkFollowedLine is hangar's part of a followed line's way to a live reader, in one
// process: a chunk the follower read is recorded (Classify, the store's append) and reaches a
// reader of the session's events (the notifier, the feed's read of the store, the stream).
func BenchmarkFollowedLine(b *testing.B) {
	for _, size := range []int{100, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) { benchmarkFollowedLine(b, size) })
	}
}

func benchmarkFollowedLine(b *testing.B, size int) {
	ctx := context.Background()
	f := newFixture(b)
	f.cfg.Streams = stream.New(stream.Config{})
	s := New(f.cfg)
	defer s.Close()
	se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		b.Fatal(err)
	}
	gate := filepath.Join(b.TempDir(), "gate")
	defer os.WriteFile(gate, nil, 0o644)
	tu, err := s.StartTurn(ctx, ada, "s1", waitGate(gate))
	if err != nil {
		b.Fatal(err)
	}
	t0, err := f.st.GetTurn(ctx, tu.ID)
	if err != nil {
		b.Fatal(err)
	}
	st, err := s.Follow(ctx, ada, "s1", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sse, err := s.getSession(ctx, ada, se.Name)
	if err != nil {
		b.Fatal(err)
	}
	r := &logReader{s: s, se: sse, t: t0}
	line := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("a", max(size-70, 1)) + `"}]}}` + "\n")
	var recorded, fed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := r.take(ctx, line); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		for got := false; !got; {
			items, err := st.Next(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				got = got || len(it.Data) > 0 && it.ID != "1" // past turn.started
			}
		}
		recorded += mid.Sub(start)
		fed += time.Since(mid)
	}
	b.ReportMetric(float64(recorded.Microseconds())/float64(b.N), "µs-record")
	b.ReportMetric(float64(fed.Microseconds())/float64(b.N), "µs-feed")
}
