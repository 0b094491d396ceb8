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
	"time"
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

// limitListener is a listener at the descriptor limit with no connection waiting: its first
// Accept fails with EMFILE (the kernel takes a descriptor before it looks for a connection),
// and the next waits for a connection, as accept does once the spare is freed, until Close.
type limitListener struct {
	net.Listener
	waiting chan struct{} // closed once an Accept waits
	waited  sync.Once
	once    sync.Once
	closed  chan struct{}
	failed  bool
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	l.waited.Do(func() { close(l.waiting) })
	<-l.closed
	return nil, net.ErrClosed
}

func (l *limitListener) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

// TestCloseWhileShedding: Close ends a shed's Accept that waits for a connection (a server at
// its descriptor limit, idle, told to shut down), rather than waiting for a client to come.
func TestCloseWhileShedding(t *testing.T) {
	inner := &limitListener{waiting: make(chan struct{}), closed: make(chan struct{})}
	ln := NewListener(inner, slog.New(slog.DiscardHandler), "{}")
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	<-inner.waiting
	closed := make(chan struct{})
	go func() { ln.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a liveness guard, not a speed target: Close deadlocked
		t.Fatal("Close is still waiting for the shed's Accept")
	}
	if err := <-accepted; err != net.ErrClosed {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.spare != nil {
		t.Error("a spare descriptor was taken again after Close")
	}
}
