// Package shed keeps a server that has run out of file descriptors answering: a connection
// that waits while none is left is told so (503) at once, instead of hanging in the kernel's
// backlog until one frees. hangar and hangar-envd listen through it. It imports nothing of
// hangar's.
package shed

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

// Listener keeps one spare file descriptor so that a server out of descriptors can still say
// so. When Accept fails with EMFILE or ENFILE, http.Server would retry it every second at
// most, while the client's connection waits in the kernel's backlog and its request hangs
// unanswered; instead the spare is closed, the waiting connection taken, answered 503 with
// the body it was made with and closed, and the spare taken again. An HTTP/1.1 client reads
// the 503; an h2c one sees its connection end, which it takes as unavailable too.
//
// The freed spare is the only descriptor to answer with: another goroutine that opens a file
// or a connection at that moment (a store's pool growing) can take it first, and then the
// waiting connection waits until a descriptor frees, as it would without this.
type Listener struct {
	net.Listener
	log      *slog.Logger
	response []byte // the whole HTTP answer

	mu     sync.Mutex // guards spare and closed; never held across Accept or a connection's I/O
	spare  *os.File   // nil: none (it could not be opened again yet, or is freed for a shed)
	closed bool       // Close was called: no spare is taken again
}

// NewListener sheds ln's connections when the process is out of descriptors, answering each
// 503 with body, a JSON document for a person (its message should say what ran out).
func NewListener(ln net.Listener, log *slog.Logger, body string) *Listener {
	l := &Listener{Listener: ln, log: log, response: []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 5\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)}
	l.spare, _ = os.Open(os.DevNull)
	return l
}

func (l *Listener) Accept() (net.Conn, error) {
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
// again. It reports whether it had a spare to free. The lock is not held meanwhile: at the
// descriptor limit accept fails whether or not a connection waits, so the Accept below may
// wait for the next one, and Close must be able to end it.
func (l *Listener) shed() bool {
	l.mu.Lock()
	spare := l.spare
	l.spare = nil
	l.mu.Unlock()
	if spare == nil {
		l.reopen()
		return false
	}
	spare.Close()
	c, err := l.Listener.Accept()
	if err == nil {
		l.log.Warn("out of file descriptors: a connection was answered 503", "remote", c.RemoteAddr().String())
		// Read what the client sent first, so closing does not reset the connection
		// before it reads the answer. The descriptor is the spare's, freed again below.
		c.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		c.Read(buf)
		c.Write(l.response)
		c.Close()
	}
	l.reopen()
	return true
}

// reopen takes a spare again, unless there is one or the listener is closed.
func (l *Listener) reopen() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil && !l.closed {
		l.spare, _ = os.Open(os.DevNull)
	}
}

// Close closes the listener (ending an Accept that waits, a shed's too) and lets the spare go.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	if l.spare != nil {
		l.spare.Close()
		l.spare = nil
	}
	l.mu.Unlock()
	return err
}
