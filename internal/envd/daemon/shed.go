package daemon

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// shedListener keeps one spare file descriptor so that a daemon out of descriptors can still
// say so. When Accept fails with EMFILE or ENFILE, http.Server would retry it every second at
// most, while the client's connection waits in the kernel's backlog and its request hangs
// unanswered; instead the spare is closed, the waiting connection taken, answered 503 (an
// HTTP/1.1 client, E2B's SDKs or hangar's health probe, reads it as Unavailable; an h2c one
// sees its connection end, which is Unavailable too) and closed, and the spare taken again.
type shedListener struct {
	net.Listener
	log *slog.Logger

	mu    sync.Mutex // guards spare
	spare *os.File   // nil: none (it could not be opened again yet)
}

func newShedListener(ln net.Listener, log *slog.Logger) *shedListener {
	l := &shedListener{Listener: ln, log: log}
	l.spare, _ = os.Open(os.DevNull)
	return l
}

// shedBody is the Connect error a shed connection is told; its message starts as envd's client
// expects of a daemon out of a resource ("the daemon is out of <what>: ...").
const shedBody = `{"code":"unavailable","message":"the daemon is out of file descriptors: it could not accept a connection"}`

// shedResponse is the whole answer, with the status that Connect's HTTP/1.1 clients read as
// unavailable.
var shedResponse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 5\r\n" +
	"Content-Length: " + strconv.Itoa(len(shedBody)) + "\r\n\r\n" + shedBody

func (l *shedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err == nil || !(errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
			return c, err
		}
		if !l.shed() {
			return nil, err // no spare: http.Server backs off and tries again
		}
	}
}

// shed frees the spare, takes one waiting connection and answers it, and takes the spare
// again. It reports whether it had a spare to free.
func (l *shedListener) shed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil {
		l.spare, _ = os.Open(os.DevNull)
		return false
	}
	l.spare.Close()
	l.spare = nil
	c, err := l.Listener.Accept()
	if err == nil {
		l.log.Warn("the daemon is out of file descriptors: a connection was refused", "remote", c.RemoteAddr().String())
		// Read what the client sent first, so closing does not reset the connection
		// before it reads the answer. The descriptor is the spare's, freed again below.
		c.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		c.Read(buf)
		c.Write([]byte(shedResponse))
		c.Close()
	}
	l.spare, _ = os.Open(os.DevNull)
	return true
}

// Close closes the listener and lets the spare go.
func (l *shedListener) Close() error {
	l.mu.Lock()
	if l.spare != nil {
		l.spare.Close()
		l.spare = nil
	}
	l.mu.Unlock()
	return l.Listener.Close()
}
