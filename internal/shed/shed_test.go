package shed

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
)

// emfileListener fails its first Accept with EMFILE, as a daemon out of descriptors does
// while a client waits in the backlog, then hands out that client's connection.
type emfileListener struct {
	net.Listener
	mu     sync.Mutex
	failed bool
	conn   net.Conn
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	if c := l.conn; c != nil {
		l.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

func (l *emfileListener) Close() error { return nil }

// TestShedOutOfDescriptors: a connection that waits while the server is out of descriptors is
// answered 503 (Unavailable, saying so) at once, instead of hanging until one frees.
func TestShedOutOfDescriptors(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	const body = `{"code":"unavailable","message":"out of file descriptors"}`
	ln := NewListener(&emfileListener{conn: server}, slog.New(slog.DiscardHandler), body)
	defer ln.Close()
	answered := make(chan *http.Response, 1)
	go func() {
		client.Write([]byte("GET /health HTTP/1.1\r\nHost: envd\r\n\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(client), nil)
		if err != nil {
			t.Errorf("read the answer: %v", err)
		}
		answered <- resp
	}()
	if _, err := ln.Accept(); err != net.ErrClosed {
		t.Errorf("Accept after shedding = %v, want the listener's next answer", err)
	}
	resp := <-answered
	if resp == nil {
		return
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || string(got) != body || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the shed connection got %d %s", resp.StatusCode, got)
	}
}
