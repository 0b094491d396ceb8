package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// stampedCommand prints n lines, one every interval, each stamped with the time it was printed:
// "L <i> <seconds since the epoch, microseconds>" (bash's EPOCHREALTIME, no fork per line).
func stampedCommand(n int, interval time.Duration) string {
	return fmt.Sprintf(`for i in $(seq %d); do sleep %.3f; echo "L $i $EPOCHREALTIME"; done`, n, interval.Seconds())
}

// stampedCommandFrom is stampedCommand for hundreds at once. The first line waits for the
// clock to reach from, so that every stream is open before any prints and the start-up of
// hundreds of shells is not what is measured; after the last line the shell waits until
// until, so that hundreds of them end together once every stream has printed, not in the
// middle of the others' last lines. No process is started once it runs: read -t on a pipe
// nobody writes instead of sleep, bash's own loop instead of seq.
func stampedCommandFrom(n int, interval time.Duration, from, until time.Time) string {
	return fmt.Sprintf(`exec 9<> <(:); wait_until() { local r=$(( $1 - ${EPOCHREALTIME/./} )) f; (( r > 0 )) || return 0; printf -v f %%06d $(( r %% 1000000 )); read -t "$(( r / 1000000 )).$f" -u 9; }; `+
		`wait_until %d; for ((i = 1; i <= %d; i++)); do read -t %.3f -u 9; echo "L $i $EPOCHREALTIME"; done; wait_until %d; exit 0`,
		from.UnixMicro(), n, interval.Seconds(), until.UnixMicro())
}

// line is one stamped line: when it was printed and when the client had it.
type line struct {
	i           int
	printed, at time.Time
}

// lineReader turns output, as it arrives, into stamped lines. Safe for one goroutine.
type lineReader struct {
	partial strings.Builder
	lines   []line
}

func (r *lineReader) feed(text string, at time.Time) {
	r.partial.WriteString(text)
	buf := r.partial.String()
	for {
		nl := strings.IndexByte(buf, '\n')
		if nl < 0 {
			break
		}
		r.parse(strings.TrimRight(buf[:nl], "\r"), at)
		buf = buf[nl+1:]
	}
	r.partial.Reset()
	r.partial.WriteString(buf)
}

// readAll feeds everything src gives, as it arrives, until its end (nil) or another error.
func (r *lineReader) readAll(src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.feed(string(buf[:n]), time.Now())
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) parse(s string, at time.Time) {
	idx := strings.Index(s, "L ")
	if idx < 0 {
		return
	}
	f := strings.Fields(s[idx:])
	if len(f) != 3 {
		return
	}
	i, err1 := strconv.Atoi(f[1])
	secs, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil {
		return
	}
	printed := time.Unix(0, int64(math.Round(secs*1e6))*1000)
	r.lines = append(r.lines, line{i: i, printed: printed, at: at})
}

// run is one run of a mode: when the client asked, and the lines it got.
type run struct {
	start time.Time
	lines []line
}

// stats summarises a mode's runs.
type stats struct {
	Runs               int     `json:"runs"`
	Lines              int     `json:"lines"`
	FirstLineP50Ms     float64 `json:"first_line_p50_ms"`
	FirstLineP95Ms     float64 `json:"first_line_p95_ms"`
	FirstOverheadP50Ms float64 `json:"first_line_overhead_p50_ms"`
	FirstOverheadP95Ms float64 `json:"first_line_overhead_p95_ms"`
	DelayP50Ms         float64 `json:"line_delay_p50_ms"`
	DelayP95Ms         float64 `json:"line_delay_p95_ms"`
	DelayP99Ms         float64 `json:"line_delay_p99_ms"`
	Missing            int     `json:"lines_missing"`
	Note               string  `json:"note,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(xs []float64, p float64) float64 { return benchkit.Percentile(xs, p) }

func summarise(runs []run, want int) stats {
	var first, overhead, delay []float64
	st := stats{Runs: len(runs)}
	for _, r := range runs {
		st.Lines += len(r.lines)
		st.Missing += max(0, want-len(r.lines))
		if len(r.lines) == 0 {
			continue
		}
		l1 := r.lines[0]
		first = append(first, ms(l1.at.Sub(r.start)))
		overhead = append(overhead, ms(l1.at.Sub(l1.printed)))
		for _, l := range r.lines {
			delay = append(delay, ms(l.at.Sub(l.printed)))
		}
	}
	st.FirstLineP50Ms, st.FirstLineP95Ms = percentile(first, 50), percentile(first, 95)
	st.FirstOverheadP50Ms, st.FirstOverheadP95Ms = percentile(overhead, 50), percentile(overhead, 95)
	st.DelayP50Ms, st.DelayP95Ms, st.DelayP99Ms = percentile(delay, 50), percentile(delay, 95), percentile(delay, 99)
	return st
}

// delays collects line delays from many goroutines.
type delays struct {
	mu sync.Mutex
	ms []float64
	n  int
}

func (d *delays) add(lines []line) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range lines {
		d.ms = append(d.ms, ms(l.at.Sub(l.printed)))
	}
	d.n += len(lines)
}
