package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
)

// stampedCommand prints n lines, one every interval, each stamped with the time it was printed:
// "L <i> <seconds since the epoch, microseconds>" (bash's EPOCHREALTIME, no fork per line: read
// -t on a pipe nobody writes instead of sleep). The first line waits for the clock to reach
// from, so that with many streams every one is open before any prints.
func stampedCommand(n int, interval time.Duration, from time.Time) string {
	return fmt.Sprintf(`exec 9<> <(:); while (( ${EPOCHREALTIME/./} < %d )); do read -t 0.02 -u 9; done; for i in $(seq %d); do read -t %.3f -u 9; echo "L $i $EPOCHREALTIME"; done`,
		from.UnixMicro(), n, interval.Seconds())
}

// delays runs a stamped command on c and returns each line's delay (received minus printed),
// in milliseconds, and how many of the n lines did not come.
func delays(ctx context.Context, c *envd.Client, n int, interval time.Duration, from time.Time) ([]float64, int, error) {
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "bash", Args: []string{"-c", stampedCommand(n, interval, from)}})
	if err != nil {
		return nil, n, err
	}
	defer s.Close()
	var partial []byte
	var out []float64
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, n - len(out), nil
		}
		if err != nil {
			return out, n - len(out), err
		}
		if ev.Kind != envd.EventStdout {
			continue
		}
		at := time.Now()
		partial = append(partial, ev.Data...)
		for {
			nl := slices.Index(partial, '\n')
			if nl < 0 {
				break
			}
			if printed, ok := parseStamp(string(partial[:nl])); ok {
				out = append(out, float64(at.Sub(printed).Microseconds())/1000)
			}
			partial = partial[nl+1:]
		}
	}
}

// parseStamp reads "L <i> <seconds.micros>".
func parseStamp(s string) (time.Time, bool) {
	f := strings.Fields(s)
	if len(f) != 3 || f[0] != "L" {
		return time.Time{}, false
	}
	secs, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(math.Round(secs*1e6))*1000), true
}

// throughput runs a command writing mib MiB of zeros to stdout and returns MiB/s, from the
// request to the end event.
func throughput(ctx context.Context, c *envd.Client, mib int64) (float64, error) {
	start := time.Now()
	s, err := c.Start(ctx, envd.StartRequest{Cmd: "head", Args: []string{"-c", strconv.FormatInt(mib<<20, 10), "/dev/zero"}})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var got int64
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		got += int64(len(ev.Data))
	}
	if got != mib<<20 {
		return 0, fmt.Errorf("throughput: got %d bytes, want %d", got, mib<<20)
	}
	return float64(got) / (1 << 20) / time.Since(start).Seconds(), nil
}

// concurrent runs n stamped commands at once, 10 lines a second for seconds, and returns every
// line's delay and how many lines did not come.
func concurrent(ctx context.Context, c *envd.Client, n, seconds int) ([]float64, int, error) {
	from := time.Now().Add(time.Second + time.Duration(n)*10*time.Millisecond)
	var mu sync.Mutex
	var all []float64
	missing := 0
	var firstErr error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			d, miss, err := delays(ctx, c, seconds*10, 100*time.Millisecond, from)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, d...)
			missing += miss
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	return all, missing, firstErr
}

// percentile of sorted-or-not values (nearest rank); NaN for none.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
