package rest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/serving"
)

// sseTakeServer serves an SSE stream of three events ("a", "b" and "c", one send each) from a
// writer of an api that takes connections over, and tells on took whether this one was taken
// over, and on ended how its context ended (after the events: hold says to wait for it).
type sseTakeServer struct {
	a     *api
	hold  bool
	took  chan bool
	ended chan error
}

func newSSETakeServer(hold bool) *sseTakeServer {
	return &sseTakeServer{a: &api{Config: Config{Taken: new(serving.TakenConns)}, log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		hold: hold, took: make(chan bool, 1), ended: make(chan error, 1)}
}

func (s *sseTakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sse, err := s.a.startSSE(w, r)
	defer sse.release()
	s.took <- sse.conn != nil
	if err != nil {
		return
	}
	for _, d := range []string{"a", "b", "c"} {
		sse.outputEvent("stdout", "", []byte(d))
		if err := sse.send(); err != nil {
			return
		}
	}
	if !s.hold {
		return
	}
	select {
	case <-sse.context().Done():
		s.ended <- context.Cause(sse.context())
	case <-time.After(30 * time.Second):
		s.ended <- errors.New("the stream's context did not end within 30s of its client going")
	}
}

const threeEvents = "event: stdout\ndata: {\"data\":\"a\"}\n\n" + "event: stdout\ndata: {\"data\":\"b\"}\n\n" + "event: stdout\ndata: {\"data\":\"c\"}\n\n"

// TestSSETakesHTTP11Connections: over HTTP/1.1 an SSE stream's writer takes its connection
// over from net/http and writes its body itself: on the wire each send is one chunk, the body
// ends with the last chunk, and the connection closes, as its headers said.
func TestSSETakesHTTP11Connections(t *testing.T) {
	t.Parallel()
	s := newSSETakeServer(false)
	srv := httptest.NewServer(s)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /events HTTP/1.1\r\nHost: hangar\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	raw, err := io.ReadAll(conn) // to the end: the server closes the connection
	if err != nil {
		t.Fatalf("read the response: %v (so far %q)", err, raw)
	}
	if !<-s.took {
		t.Fatal("the writer kept to net/http's response writer over HTTP/1.1")
	}
	head, body, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok {
		t.Fatalf("no end of the headers in %q", raw)
	}
	for _, h := range []string{"HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Transfer-Encoding: chunked", "Connection: close"} {
		if !strings.Contains(head, h) {
			t.Errorf("the headers have no %q:\n%s", h, head)
		}
	}
	var want strings.Builder
	for _, e := range strings.SplitAfter(threeEvents, "\n\n")[:3] {
		want.WriteString(strconv.FormatInt(int64(len(e)), 16) + "\r\n" + e + "\r\n")
	}
	want.WriteString("0\r\n\r\n")
	if body != want.String() {
		t.Errorf("the body on the wire is\n%q\nwant\n%q", body, want.String())
	}
}

// TestSSEReadByGoClient: Go's HTTP client reads a stream taken over as a whole body, chunked,
// that ends without error and is not kept for another request.
func TestSSEReadByGoClient(t *testing.T) {
	t.Parallel()
	s := newSSETakeServer(false)
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the body: %v", err)
	}
	if string(b) != threeEvents {
		t.Errorf("body %q, want %q", b, threeEvents)
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || !resp.Close {
		t.Errorf("Transfer-Encoding %v, close %v; want chunked, close", resp.TransferEncoding, resp.Close)
	}
	if !<-s.took {
		t.Error("the connection was not taken over")
	}
}

// TestSSETakenStreamEndsWithItsClient: the context of a stream whose connection was taken
// over ends when its client goes, as a request's does under net/http: it is what ends the
// stream and kills an exec's command (TestExecStreamClientGoneKillsCommand).
func TestSSETakenStreamEndsWithItsClient(t *testing.T) {
	t.Parallel()
	s := newSSETakeServer(true)
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for range 6 { // the three events' lines and blank lines
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if !<-s.took {
		t.Fatal("the connection was not taken over")
	}
	resp.Body.Close()
	if err := <-s.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the stream's context ended with %v, want canceled", err)
	}
}

// TestSSEOverHTTP2StaysWithNetHTTP: HTTP/2's streams share their connection, which is not
// taken over: the events go through net/http's writer.
func TestSSEOverHTTP2StaysWithNetHTTP(t *testing.T) {
	t.Parallel()
	s := newSSETakeServer(false)
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the client spoke %s, want HTTP/2", resp.Proto)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != threeEvents {
		t.Errorf("body %q (%v), want %q", b, err, threeEvents)
	}
	if <-s.took {
		t.Error("an HTTP/2 stream's connection was taken over")
	}
}
