package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// out is an output event of the attach stream: text ending at offset end.
type ev struct{ id, name, data string }

func out(end int, text string) ev {
	return ev{fmt.Sprint(end), "output", fmt.Sprintf(`{"data":%q}`, text)}
}

// TestOutputCheck: output that goes on where it was, or after a gap, passes; a repeated or
// skipped offset or line without a gap is a problem.
func TestOutputCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		events   []ev
		problems int
		lost     int
	}{
		{"whole", []ev{out(4, "1\n2\n"), out(6, "3\n"), {"6", "end", "{}"}}, 0, 0},
		{"a line cut between events", []ev{out(3, "1\n2"), out(6, "\n3\n")}, 0, 0},
		// After a gap the first line is dropped, since the gap may have cut it: it counts as lost.
		{"a gap after a takeover", []ev{out(4, "1\n2\n"), {"", "gap", `{"from":4,"to":100}`}, out(104, "7\n8\n"), {"104", "end", "{}"}}, 0, 5},
		{"a gap that cuts a line", []ev{out(4, "1\n2\n"), {"", "gap", `{"from":4,"to":100}`}, out(106, "07\n18\n")}, 0, 15},
		{"repeated offsets", []ev{out(4, "1\n2\n"), out(6, "2\n3\n")}, 2, 0},
		{"skipped offsets", []ev{out(4, "1\n2\n"), out(8, "4\n")}, 2, 0},
		{"repeated lines after a gap", []ev{out(4, "1\n2\n"), {"", "gap", `{"from":4,"to":10}`}, out(14, "x\n2\n")}, 1, 0},
		{"an end past the output", []ev{out(4, "1\n2\n"), {"9", "end", "{}"}}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c outputCheck
			for _, e := range tc.events {
				c.event(e.id, e.name, []byte(e.data))
			}
			if len(c.problems) != tc.problems || c.lost != tc.lost {
				t.Errorf("problems %q, lost %d; want %d problems, %d lost", c.problems, c.lost, tc.problems, tc.lost)
			}
		})
	}
}

func TestCountCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text  string
		whole bool
		ok    bool
	}{
		{"1\n2\n3\n", true, true},
		{"1\n2\n", true, false},
		{"1\n2\n1", false, false},
		{"1\n2\n", false, true},
		{"1\n2\n3\n4", true, false},
		{"1\n3\n", false, false},
		{"1\n2\n2\n", false, false},
	} {
		if err := countCheck(tc.text, 3, tc.whole); (err == nil) != tc.ok {
			t.Errorf("countCheck(%q, 3, %v) = %v, want ok %v", tc.text, tc.whole, err, tc.ok)
		}
	}
}

func TestTurnLines(t *testing.T) {
	t.Parallel()
	fx := []string{"a", "b", "c"}
	for _, tc := range []struct {
		got       []string
		lost, dup int
		ordered   bool
	}{
		{[]string{"a", "b", "c"}, 0, 0, true},
		{[]string{"a", "c"}, 1, 0, false},
		{[]string{"a", "b", "b", "c"}, 0, 1, false},
		{[]string{"b", "a", "c"}, 0, 0, false},
	} {
		lost, dup, ordered := turnLines(fx, tc.got)
		if lost != tc.lost || dup != tc.dup || ordered != tc.ordered {
			t.Errorf("turnLines(%q) = %d, %d, %v; want %d, %d, %v", tc.got, lost, dup, ordered, tc.lost, tc.dup, tc.ordered)
		}
	}
	if canonical([]byte(`{"b":1, "a":[1,2]}`)) != canonical([]byte(`{"a":[1,2],"b":1}`)) {
		t.Error("canonical spells one value two ways")
	}
}

// TestProxy: requests go to the backends in rotation only; a refused connection is tried on
// another backend; with none left the proxy answers 502.
func TestProxy(t *testing.T) {
	t.Parallel()
	var served [2]int
	var backends []*replica
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served[i]++
			fmt.Fprint(w, i)
		}))
		defer srv.Close()
		backends = append(backends, &replica{name: fmt.Sprint(i), url: srv.URL})
	}
	// A backend whose port refuses: a crashed replica still in rotation.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	backends = append(backends, &replica{name: "dead", url: dead.URL})
	px, err := newProxy(backends)
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	get := func() (int, string) {
		resp, err := http.Post(px.url+"/x", "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	px.take(backends[1], false)
	for range 20 {
		if code, body := get(); code != 200 || body != "0" {
			t.Fatalf("with backend 1 out and the other refusing: %d %q, want 200 from backend 0", code, body)
		}
	}
	if served[1] != 0 {
		t.Errorf("backend 1 got %d requests while out of rotation", served[1])
	}
	px.take(backends[0], false)
	if code, _ := get(); code != http.StatusBadGateway {
		t.Errorf("with every backend out or refusing: %d, want 502", code)
	}
}

// TestProxyBrokenStream: a backend that breaks its answer midway breaks the client's
// connection too, so that the client never takes the part for the whole.
func TestProxyBrokenStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	px, err := newProxy([]*replica{{name: "a", url: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	resp, err := http.Get(px.url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("read %q and a clean end, want the part and an error", b)
	}
}
