package rest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/stream"
)

// TestClientFailedSaysWhatFoundTheClientSlow: a write to the client that missed its deadline
// ends the stream slow, counted as a write timeout; any other failure is the client gone.
func TestClientFailedSaysWhatFoundTheClientSlow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err    error
		reason stream.Reason
		slow   float64
	}{
		"the write timed out": {fmt.Errorf("write tcp: %w", os.ErrDeadlineExceeded), stream.ReasonSlow, 1},
		"the client is gone":  {errors.New("write tcp: broken pipe"), stream.ReasonClient, 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			st, err := stream.New(stream.Config{Registerer: reg}).Open(context.Background(), stream.Options{Kind: stream.KindExec})
			if err != nil {
				t.Fatal(err)
			}
			reason := (&api{}).clientFailed(st, tc.err)
			st.Close()
			if reason != tc.reason {
				t.Errorf("clientFailed = %s, want %s", reason, tc.reason)
			}
			if got := slowCount(t, reg, "write_timeout"); got != tc.slow {
				t.Errorf(`hangar_stream_slow{trigger="write_timeout"} = %v, want %v`, got, tc.slow)
			}
		})
	}
}

// slowCount is hangar_stream_slow's value for trigger (0 when it has no such series).
func slowCount(t *testing.T, reg *prometheus.Registry, trigger string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hangar_stream_slow" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "trigger" && l.GetValue() == trigger {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
