package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	in := ": keep-alive\n\nevent: output\nid: 2\ndata: {\"data\":\"1\\n\"}\n\n" +
		"data:a\r\ndata: b\r\n\r\n" + // CRLF, no space after the colon, two data lines
		"id: 7\ndata: x\n\nevent: end\ndata: cut off"
	r := newSSEReader(strings.NewReader(in))
	want := []event{{Name: "output", ID: "2", Data: []byte(`{"data":"1\n"}`)}, {Data: []byte("a\nb")}, {ID: "7", Data: []byte("x")}}
	for i, w := range want {
		got, err := r.next()
		if err != nil || got.Name != w.Name || got.ID != w.ID || string(got.Data) != string(w.Data) {
			t.Fatalf("event %d = %+v %q, %v; want %+v %q", i, got, got.Data, err, w, w.Data)
		}
	}
	if _, err := r.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an event cut off by the end: %v, want io.ErrUnexpectedEOF (the stream broke)", err)
	}
	if _, err := newSSEReader(strings.NewReader("data: x\n\n")).next(); err != nil {
		t.Error(err)
	}
	r = newSSEReader(strings.NewReader("data: x\n\n"))
	r.next()
	if _, err := r.next(); err != io.EOF {
		t.Errorf("a clean end: %v, want io.EOF", err)
	}
}

// FuzzSSEReader: any input ends in EOF or ErrUnexpectedEOF, never a panic or a loop, and every
// event's data is made of the input's data lines.
func FuzzSSEReader(f *testing.F) {
	f.Add("event: a\nid: 1\ndata: x\n\n")
	f.Add(":c\r\ndata\n\ndata: \n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := newSSEReader(strings.NewReader(in))
		for i := 0; i <= len(in); i++ {
			ev, err := r.next()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("error %v", err)
				}
				return
			}
			if len(ev.Data) > len(in) {
				t.Fatalf("data %q longer than the input %q", ev.Data, in)
			}
		}
		t.Fatalf("more events than bytes in %q", in)
	})
}
