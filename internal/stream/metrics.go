package stream

import "github.com/prometheus/client_golang/prometheus"

// metrics are the spec's — open streams, closed streams by reason, bytes, and the time to first
// output, each by kind — and hangar's own: streams ended slow by what found them slow.
type metrics struct {
	open        *prometheus.GaugeVec
	closed      *prometheus.CounterVec
	slow        *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	firstOutput *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hangar_streams_open", Help: "Open streams, by kind.",
		}, []string{"kind"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_streams", Help: "Streams closed, by kind and the reason they ended.",
		}, []string{"kind", "reason"}),
		slow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_stream_slow",
			Help: "Streams ended slow, by kind and what found the client slow: queue_full, stall, write_timeout.",
		}, []string{"kind", "trigger"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hangar_stream_bytes", Help: "Bytes streamed, by kind.",
		}, []string{"kind"}),
		firstOutput: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hangar_stream_first_output_seconds",
			Help:    "From a stream's start to its first output, by kind.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.closed, m.slow, m.bytes, m.firstOutput)
	}
	return m
}
