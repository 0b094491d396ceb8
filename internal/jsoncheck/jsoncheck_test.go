package jsoncheck

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLoneSurrogateAt(t *testing.T) {
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"command": "echo hi"}`, -1},
		{`{"command": "\ud83d\ude80"}`, -1}, // a pair: 🚀
		{`{"command": "\u00e9\u2603"}`, -1},
		{`{"command": "\\ud800"}`, -1}, // an escaped backslash, then text
		{`{"command": "\"\ud800"}`, 15},
		{`{"command": "\ud800"}`, 13},
		{`{"command": "\ude80"}`, 13},
		{`{"command": "\ud83d\u0041"}`, 13},
		{`{"command": "\ud83d"} "\ude80"`, 13},
		{`{"command": "x", "cwd": "\udfff"}`, 25},
		{`{"\ud800": 1}`, 2},
	} {
		if got := LoneSurrogateAt([]byte(c.body)); got != c.want {
			t.Errorf("%s: %d, want %d", c.body, got, c.want)
		}
	}
}

// FuzzLoneSurrogateAt: whatever JSON string encoding/json decodes, it turns into U+FFFD only
// what loneSurrogateAt finds (or a U+FFFD the body itself says).
func FuzzLoneSurrogateAt(f *testing.F) {
	for _, s := range []string{`"\ud83d\ude80"`, `"\ud800"`, `"\\ud800"`, `"a\"\udc00"`, `"\ud83d\u0041"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) || strings.ContainsRune(string(body), utf8.RuneError) || strings.Contains(strings.ToLower(string(body)), `\ufffd`) {
			return
		}
		var s string
		if json.Unmarshal(body, &s) != nil {
			return
		}
		if strings.ContainsRune(s, utf8.RuneError) && LoneSurrogateAt(body) < 0 {
			t.Fatalf("%q decodes to %q with U+FFFD, and no lone surrogate was found", body, s)
		}
		if !strings.ContainsRune(s, utf8.RuneError) && LoneSurrogateAt(body) >= 0 {
			t.Fatalf("%q decodes to %q, yet a lone surrogate was found at %d", body, s, LoneSurrogateAt(body))
		}
	})
}

func TestInvalidUTF8At(t *testing.T) {
	for body, want := range map[string]int{"": -1, `{"a": "é"}`: -1, "{\"a\": \"\xff\"}": 7, "\xe2\x82": 0, "ok\xc3": 2} {
		if got := InvalidUTF8At([]byte(body)); got != want {
			t.Errorf("InvalidUTF8At(%q) = %d, want %d", body, got, want)
		}
	}
}
