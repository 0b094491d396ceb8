package process

import (
	"sort"
	"time"
)

// markEvery is how far apart in time a ring's marks are: a time is resolved to an offset to
// within it.
const markEvery = time.Second

// maxMarks bounds the marks a ring keeps (64 KiB of them): more than an hour of output printed
// every second. Kept output older than the oldest mark is read whole by a time before it.
const maxMarks = 4096

// mark says when output was written: the bytes from off to the next mark's off were written in
// [at, at+markEvery).
type mark struct {
	at  time.Time
	off int64
}

// ring keeps the last size bytes of a process's output, addressed by absolute byte offsets:
// the first byte the process ever printed is offset 0. It is not safe for concurrent use; the
// process's lock guards it.
type ring struct {
	buf   []byte
	start int64  // offset of the oldest byte kept
	end   int64  // offset one past the newest byte: everything ever written
	marks []mark // oldest first; the first may start before start
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// startAt makes an empty ring's first offset off: a process taken over from its record carries
// on from where its offsets were given out, and nothing before is kept.
func (r *ring) startAt(off int64) { r.start, r.end = off, off }

// write appends p, written at at, forgetting the oldest bytes past the ring's size.
func (r *ring) write(p []byte, at time.Time) {
	if n := len(r.marks); len(p) > 0 && (n == 0 || at.Sub(r.marks[n-1].at) >= markEvery) {
		r.marks = append(r.marks, mark{at: at, off: r.end})
	}
	size := int64(len(r.buf))
	if skip := int64(len(p)) - size; skip > 0 {
		r.end += skip // written and at once forgotten
		p = p[skip:]
	}
	for len(p) > 0 {
		at := r.end % size
		n := copy(r.buf[at:], p)
		p = p[n:]
		r.end += int64(n)
	}
	if r.end-r.start > size {
		r.start = r.end - size
	}
	drop := 0
	for drop+1 < len(r.marks) && (r.marks[drop+1].off <= r.start || len(r.marks)-drop > maxMarks) {
		drop++
	}
	r.marks = r.marks[drop:]
}

// offsetAt is the offset of the first byte kept that was written at or after t, to within
// markEvery (it may be up to markEvery earlier, never later): the oldest kept when t is before
// the oldest mark, the end when nothing was written since t.
func (r *ring) offsetAt(t time.Time) int64 {
	i := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].at.After(t) })
	switch {
	case i == 0:
		return r.start
	case t.Sub(r.marks[i-1].at) < markEvery:
		return max(r.marks[i-1].off, r.start)
	case i < len(r.marks):
		return r.marks[i].off
	}
	return r.end
}

// read returns the bytes from offset since to the end, and the gap before them: when since is
// older than what is kept, gapFrom..gapTo (gapTo = the oldest offset kept) is missing and the
// data starts at gapTo. A since past the end reads nothing (and no gap). since must be >= 0.
func (r *ring) read(since int64) (data []byte, gapFrom, gapTo int64) {
	if since < r.start {
		gapFrom, gapTo, since = since, r.start, r.start
	}
	if since >= r.end {
		return nil, gapFrom, gapTo
	}
	size := int64(len(r.buf))
	out := make([]byte, 0, r.end-since)
	for off := since; off < r.end; {
		at := off % size
		n := min(size-at, r.end-off)
		out = append(out, r.buf[at:at+n]...)
		off += n
	}
	return out, gapFrom, gapTo
}
