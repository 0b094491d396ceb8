package mcp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/serving"
)

// takeServer answers each request with an event stream through a sink that may take its
// connection over (as serveHere's), with one event; hold: then it waits until the request's
// context ends (the client went), else it ends the response. It tells on took whether the
// connection was taken over, and on ended how the wait ended.
func takeServer(t *testing.T, hold bool) (addr string, took chan bool, ended chan error) {
	took, ended = make(chan bool, 1), make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, gone := context.WithCancel(r.Context())
		defer gone()
		s := newSink(w, ctx, 15*time.Second, 30*time.Second, quartz.NewReal())
		s.mayTake(new(serving.TakenConns), gone)
		defer s.close()
		w.Header().Set("Content-Type", "text/event-stream")
		s.startStream()
		if _, err := s.event([]byte("event: message\ndata: {}\n\n")); err != nil {
			t.Errorf("event: %v", err)
		}
		took <- s.conn != nil
		if !hold {
			return
		}
		select {
		case <-ctx.Done():
			ended <- context.Cause(ctx)
		case <-time.After(30 * time.Second):
			ended <- errors.New("the request's context did not end within 30s of its client going")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), took, ended
}

func post(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: hangar\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return conn
}

// TestSinkTakesHTTP11Streams: over HTTP/1.1 an MCP response stream's connection is taken over
// once its headers are out, as a REST stream's is: each flush is one chunk on the wire, the
// body ends with the last chunk when the SDK is done, and the connection closes, as its
// headers said.
func TestSinkTakesHTTP11Streams(t *testing.T) {
	t.Parallel()
	addr, took, _ := takeServer(t, false)
	conn := post(t, addr)
	defer conn.Close()
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the response: %v (so far %q)", err, raw)
	}
	if !<-took {
		t.Fatal("the sink kept to net/http's writer over HTTP/1.1")
	}
	head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, h := range []string{"HTTP/1.1 200 OK", "Content-Type: text/event-stream", "X-Accel-Buffering: no", "Transfer-Encoding: chunked", "Connection: close"} {
		if !strings.Contains(head, h) {
			t.Errorf("the headers have no %q:\n%s", h, head)
		}
	}
	if want := "6\r\n: ok\n\n\r\n19\r\nevent: message\ndata: {}\n\n\r\n0\r\n\r\n"; body != want {
		t.Errorf("the body on the wire is\n%q\nwant\n%q", body, want)
	}
}

// TestSinkTakenStreamEndsWithItsClient: the request's context of a response stream taken
// over ends when its client goes, as net/http ends it for a stream it keeps: it is what
// cancels a call whose client went (PropagateRequestCancellation).
func TestSinkTakenStreamEndsWithItsClient(t *testing.T) {
	t.Parallel()
	addr, took, ended := takeServer(t, true)
	conn := post(t, addr)
	buf := make([]byte, 4096)
	var got string
	for !strings.Contains(got, "event: message") {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (so far %q)", err, got)
		}
		got += string(buf[:n])
	}
	if !<-took {
		t.Fatal("the connection was not taken over")
	}
	conn.Close()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the request's context ended with %v, want canceled", err)
	}
}
