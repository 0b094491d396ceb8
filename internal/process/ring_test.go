package process

import (
	"bytes"
	"testing"
	"time"
)

// model is the ring's meaning: everything ever written, of which the last size bytes are kept.
func checkRing(t *testing.T, r *ring, all []byte, since int64) {
	t.Helper()
	size := int64(len(r.buf))
	data, gapFrom, gapTo := r.read(since)
	total := int64(len(all))
	if r.end != total {
		t.Fatalf("end = %d, want %d", r.end, total)
	}
	oldest := max(0, total-size)
	if r.start != oldest {
		t.Fatalf("start = %d, want %d", r.start, oldest)
	}
	from := since
	if since < oldest {
		if gapFrom != since || gapTo != oldest {
			t.Fatalf("read(%d) gap = %d..%d, want %d..%d", since, gapFrom, gapTo, since, oldest)
		}
		from = oldest
	} else if gapFrom != 0 || gapTo != 0 {
		t.Fatalf("read(%d) reported a gap %d..%d", since, gapFrom, gapTo)
	}
	var want []byte
	if from < total {
		want = all[from:]
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("read(%d) = %d bytes, want %d", since, len(data), len(want))
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(10)
	var all []byte
	for i, chunk := range []string{"abc", "defg", "hijklmn", "", "o", "0123456789abcdef", "xyz"} {
		r.write([]byte(chunk), time.Time{})
		all = append(all, chunk...)
		for since := int64(0); since <= int64(len(all))+2; since++ {
			checkRing(t, r, all, since)
		}
		_ = i
	}
}

func FuzzRing(f *testing.F) {
	f.Add(uint8(7), []byte("hello world, this is a test of the ring"), uint16(3), int64(5))
	f.Add(uint8(1), []byte("ab"), uint16(1), int64(0))
	f.Add(uint8(16), bytes.Repeat([]byte("x"), 100), uint16(33), int64(90))
	f.Fuzz(func(t *testing.T, size uint8, data []byte, step uint16, since int64) {
		if size == 0 || step == 0 || since < 0 {
			return
		}
		r := newRing(int(size))
		var all []byte
		for len(data) > 0 {
			n := min(int(step), len(data))
			r.write(data[:n], time.Time{})
			all = append(all, data[:n]...)
			data = data[n:]
		}
		checkRing(t, r, all, since%(int64(len(all))+3))
	})
}

// TestRingOffsetAt: a time resolves to the first byte written at or after it, to within
// markEvery and never later; before what is kept, to the oldest kept; after the last write, to
// the end.
func TestRingOffsetAt(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	r := newRing(10)
	r.write([]byte("ab"), at(0))                   // 0..2, mark at t0
	r.write([]byte("c"), at(500*time.Millisecond)) // 2..3, same mark
	r.write([]byte("de"), at(10*time.Second))      // 3..5, a mark
	r.write([]byte("fgh"), at(20*time.Second))     // 5..8, a mark
	for _, c := range []struct {
		t    time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {700 * time.Millisecond, 0}, {2 * time.Second, 3}, {10 * time.Second, 3},
		{15 * time.Second, 5}, {20*time.Second + 999*time.Millisecond, 5}, {21 * time.Second, 8}, {time.Hour, 8},
	} {
		if got := r.offsetAt(at(c.t)); got != c.want {
			t.Errorf("offsetAt(t0%+v) = %d, want %d", c.t, got, c.want)
		}
	}
	r.write([]byte("ijklmn"), at(30*time.Second)) // 8..14: keeps 4..14, "ab", "c" and "d" gone
	if len(r.marks) != 3 || r.marks[0].off != 3 {
		t.Errorf("marks = %+v, want the one at 3 first (it covers the oldest byte kept, 4), then 5 and 8", r.marks)
	}
	if got := r.offsetAt(at(0)); got != 4 {
		t.Errorf("offsetAt(t0) after the ring wrapped = %d, want 4, the oldest kept", got)
	}
	if got := r.offsetAt(at(10 * time.Second)); got != 4 {
		t.Errorf("offsetAt(t0+10s) after the ring wrapped = %d, want 4", got)
	}
}
