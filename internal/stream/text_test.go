package stream

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// cutAll feeds data to a Runes in chunks of sizes[i]%8+1 bytes (cycled; none: one chunk) and returns the chunks it
// passed on, the flushed tail last.
func cutAll(data []byte, sizes []byte) [][]byte {
	var r Runes
	var out [][]byte
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(int(sizes[i%len(sizes)])%8+1, len(data))
		}
		if d := r.Cut(data[:n]); len(d) > 0 {
			out = append(out, bytes.Clone(d))
		}
		data = data[n:]
	}
	if d := r.Flush(); len(d) > 0 {
		out = append(out, d)
	}
	return out
}

func TestRunes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		in    string
		sizes []byte
		want  []string
	}{
		{"a character split after its first byte", "a€b", []byte{0}, []string{"a", "€", "b"}},
		{"a character split after its second byte", "€€", []byte{0, 1}, []string{"€", "€"}},
		{"four bytes in ones", "🚀", []byte{0}, []string{"🚀"}},
		{"ascii passes at once", "hello", []byte{0}, []string{"h", "e", "l", "l", "o"}},
		{"not UTF-8 passes as it is", "\xff\xfe", []byte{0}, []string{"\xff", "\xfe"}},
		{"a stray continuation byte is not held", "a\x82", []byte{7}, []string{"a\x82"}},
		{"output ending inside a character is flushed", "x\xe2\x82", []byte{7}, []string{"x", "\xe2\x82"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, b := range cutAll([]byte(c.in), c.sizes) {
				got = append(got, string(b))
			}
			if len(got) != len(c.want) {
				t.Fatalf("chunks %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("chunks %q, want %q", got, c.want)
				}
			}
		})
	}
}

func TestWholeRunesKeepsStreamsApart(t *testing.T) {
	t.Parallel()
	type ev struct{ name, data string }
	var got []ev
	out, flush := WholeRunes(func(name string, data []byte) { got = append(got, ev{name, string(data)}) })
	out("stdout", []byte("\xe2\x82"))
	out("stderr", []byte("\xc3"))
	out("stdout", []byte("\xac!"))
	out("stderr", []byte("\xa9"))
	out("stdout", []byte("\xf0\x9f"))
	flush()
	want := []ev{{"stdout", "€!"}, {"stderr", "é"}, {"stdout", "\xf0\x9f"}}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}

// FuzzRunes: whatever the input and however it is cut, the chunks put back together are the
// input, byte for byte; and when the input is valid UTF-8, every chunk is (so no transport
// ever sends it base64).
func FuzzRunes(f *testing.F) {
	f.Add([]byte("a€b🚀c"), []byte{0, 1, 2})
	f.Add([]byte("\xe2\x82"), []byte{0})
	f.Add([]byte("\xff\xe2\x82\xac\xf0"), []byte{3, 1})
	f.Add([]byte("héllo wörld ☕"), []byte{})
	f.Fuzz(func(t *testing.T, data []byte, sizes []byte) {
		chunks := cutAll(data, sizes)
		if joined := bytes.Join(chunks, nil); !bytes.Equal(joined, data) {
			t.Fatalf("joined %q, want %q", joined, data)
		}
		if utf8.Valid(data) {
			for _, c := range chunks {
				if !utf8.Valid(c) {
					t.Fatalf("chunk %q of valid UTF-8 %q is not valid UTF-8", c, data)
				}
			}
		}
	})
}
