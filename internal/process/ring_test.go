package process

import (
	"bytes"
	"testing"
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
		r.write([]byte(chunk))
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
			r.write(data[:n])
			all = append(all, data[:n]...)
			data = data[n:]
		}
		checkRing(t, r, all, since%(int64(len(all))+3))
	})
}
