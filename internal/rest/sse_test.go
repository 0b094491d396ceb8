package rest

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestOutputEventIsEncodingJSONs: the renderer's hand-written output event is, byte for byte,
// what encoding/json makes of outputJSON, for every byte and character class that JSON escapes.
func TestOutputEventIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	cases := []string{"", "hi\n", `"quoted" \back\slash`, "<b>&amp;</b>", "tab\tcr\rbell\a\b\f\x00\x1f\x7f",
		"é ü 日本 🚀", "line\u2028sep\u2029par", "\xff\xfe not utf-8", "half \xe6\x97"}
	var all []byte
	for c := 0; c < 256; c++ {
		all = append(all, byte(c))
	}
	cases = append(cases, string(all), string(all[:128]))
	for _, c := range cases {
		s := &sseWriter{buf: new([]byte)}
		s.outputEvent("stdout", "7", []byte(c))
		var o outputJSON
		o.Data, o.Encoding = text([]byte(c))
		want, _ := json.Marshal(o)
		if got, want := string(*s.buf), "event: stdout\nid: 7\ndata: "+string(want)+"\n\n"; got != want {
			t.Errorf("%q (utf-8 %v):\n got %q\nwant %q", c, utf8.ValidString(c), got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add([]byte("hello <world> & \u2028"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		want, _ := json.Marshal(string(b))
		if got := appendJSONString(nil, b); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", b, got, want)
		}
	})
}
