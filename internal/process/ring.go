package process

// ring keeps the last size bytes of a process's output, addressed by absolute byte offsets:
// the first byte the process ever printed is offset 0. It is not safe for concurrent use; the
// process's lock guards it.
type ring struct {
	buf   []byte
	start int64 // offset of the oldest byte kept
	end   int64 // offset one past the newest byte: everything ever written
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// startAt makes an empty ring's first offset off: a process taken over from its record carries
// on from where its offsets were given out, and nothing before is kept.
func (r *ring) startAt(off int64) { r.start, r.end = off, off }

// write appends p, forgetting the oldest bytes past the ring's size.
func (r *ring) write(p []byte) {
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
