package turns

import (
	"bytes"
	"testing"
)

// FuzzLineSplitter feeds data in chunks of the sizes the fuzzer picks: the lines and their end
// offsets must be those of the data's complete lines, whatever the chunking.
func FuzzLineSplitter(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\nplain\npartial"), []byte{1, 5, 200})
	f.Add([]byte("\n\n\n"), []byte{0})
	f.Fuzz(func(t *testing.T, data []byte, sizes []byte) {
		start := int64(len(sizes)) // any starting offset
		l := lineSplitter{readAt: start}
		type line struct {
			text string
			end  int64
		}
		var got []line
		emit := func(b []byte, end int64) { got = append(got, line{string(b), end}) }
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(sizes) > 0 {
				n = min(int(sizes[i%len(sizes)])+1, len(rest))
			}
			l.feed(rest[:n], emit)
			rest = rest[n:]
		}
		var want []line
		off := start
		for {
			i := bytes.IndexByte(data[off-start:], '\n')
			if i < 0 {
				break
			}
			want = append(want, line{string(data[off-start : off-start+int64(i)]), off + int64(i) + 1})
			off += int64(i) + 1
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("line %d = %q ending at %d, want %q ending at %d", i, got[i].text, got[i].end, want[i].text, want[i].end)
			}
		}
		if l.readAt != start+int64(len(data)) || string(l.pending) != string(data[off-start:]) {
			t.Fatalf("after all: readAt %d, pending %q; want %d, %q", l.readAt, l.pending, start+int64(len(data)), data[off-start:])
		}
	})
}

// TestLineSplitterCapsLongLines: a line over MaxLineBytes is kept to MaxLineBytes+1 bytes (so
// Classify cuts and flags it) while the offsets count all of it.
func TestLineSplitterCapsLongLines(t *testing.T) {
	t.Parallel()
	var l lineSplitter
	long := bytes.Repeat([]byte("a"), MaxLineBytes+5000)
	var n int
	var end int64
	for i := 0; i < len(long); i += 100000 {
		l.feed(long[i:min(i+100000, len(long))], func([]byte, int64) { t.Fatal("a line before its newline") })
	}
	l.feed([]byte("\nx\n"), func(b []byte, e int64) {
		if n == 0 && (len(b) != MaxLineBytes+1 || !Classify(b).Truncated) {
			t.Errorf("long line kept %d bytes, want %d, cut by Classify", len(b), MaxLineBytes+1)
		}
		n++
		end = e
	})
	if n != 2 || end != int64(len(long))+3 {
		t.Errorf("%d lines ending at %d, want 2 ending at %d", n, end, len(long)+3)
	}
}
