package rest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// TestOutputEventIsEncodingJSONs: the renderer's hand-written output event is, byte for byte,
// what encoding/json makes of wire.Output, for every byte and character class that JSON escapes.
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
		var o wire.Output
		o.Data, o.Encoding = wire.Text([]byte(c))
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

// TestPumpRendersAnyStream: the SSE renderer needs no knowledge of a stream's kind: output
// items become {"data"} events (base64 when not text), JSON items go out as they are, an item's
// ID is the event's id, and a batch is one write.
func TestPumpRendersAnyStream(t *testing.T) {
	t.Parallel()
	reg := stream.New(stream.Config{})
	st, err := reg.Open(context.Background(), stream.Options{Kind: stream.KindWatch, Unpaced: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Send(stream.Item{Event: "change", ID: "3", Data: []byte("a <b>\n")})
	st.Send(stream.Item{Event: "bytes", Data: []byte{0xff, 0x00}})
	st.Send(stream.Item{Event: "summary", ID: "9", Data: []byte(`{"n":2}`), JSON: true})
	st.Finish()
	rec := httptest.NewRecorder()
	a := &api{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sse, err := a.startSSE(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer sse.release()
	if reason := a.pump(context.Background(), st, sse); reason != stream.ReasonDone {
		t.Fatalf("pump ended %s, want done", reason)
	}
	want := "event: change\nid: 3\ndata: {\"data\":\"a \\u003cb\\u003e\\n\"}\n\n" +
		"event: bytes\ndata: {\"data\":\"/wA=\",\"encoding\":\"base64\"}\n\n" +
		"event: summary\nid: 9\ndata: {\"n\":2}\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}

// BenchmarkAppendJSONString: the cost of an output event's data, plain ASCII (the unpaced
// stream's case); it should keep pace with encoding/json.
func BenchmarkAppendJSONString(b *testing.B) {
	s := []byte(strings.Repeat("a", 32<<10))
	buf := make([]byte, 0, 40<<10)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendJSONString(buf[:0], s)
	}
}

// flushErrorRecorder is a connection's writer as net/http's is: its flush can fail.
type flushErrorRecorder struct {
	*httptest.ResponseRecorder
	flushes int
}

func (r *flushErrorRecorder) FlushError() error { r.flushes++; return nil }

// countingWriter is a middleware's wrapper that http.ResponseController unwraps.
type countingWriter struct {
	http.ResponseWriter
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) { w.writes++; return w.ResponseWriter.Write(b) }
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestSSEWritesUnderTheWrappers: once its headers went through the middleware's wrappers (the
// metrics see the status), an SSE stream writes and flushes the writer under them, by its
// FlushError: a write and a flush for each event, without unwrapping at each.
func TestSSEWritesUnderTheWrappers(t *testing.T) {
	t.Parallel()
	inner := &flushErrorRecorder{ResponseRecorder: httptest.NewRecorder()}
	status := &statusWriter{ResponseWriter: inner}
	outer := &countingWriter{ResponseWriter: status}
	a := &api{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sse, err := a.startSSE(outer, httptest.NewRequest(http.MethodGet, "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer sse.release()
	for i := range 3 {
		sse.outputEvent("stdout", "", []byte{'a' + byte(i)})
		if err := sse.send(); err != nil {
			t.Fatal(err)
		}
	}
	if status.status != http.StatusOK {
		t.Errorf("the metrics' wrapper saw status %d, want 200", status.status)
	}
	if outer.writes != 0 {
		t.Errorf("%d writes went through the wrapper, want none", outer.writes)
	}
	if inner.flushes != 4 { // the headers, and each event
		t.Errorf("%d flushes by FlushError, want 4", inner.flushes)
	}
	want := "event: stdout\ndata: {\"data\":\"a\"}\n\nevent: stdout\ndata: {\"data\":\"b\"}\n\nevent: stdout\ndata: {\"data\":\"c\"}\n\n"
	if got := inner.Body.String(); got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
