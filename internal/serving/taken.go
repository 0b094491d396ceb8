package serving

import (
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// A long HTTP/1.1 response (an SSE stream) may be taken over from net/http once its headers are
// out: its writer then writes each batch to the connection itself, as one chunk of the chunked
// body in one write. net/http's response writer, its buffers and its chunk writer were most of
// what a line's way out of hangar cost over the relay floor (bench/README.md). The response
// says "Connection: close", as the connection closes after its last chunk.

// Takes says whether the answer to r can be taken over: r is HTTP/1.1 (whose answers net/http
// makes chunked when their length is not known), and not a HEAD.
func Takes(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.Method != http.MethodHead
}

// ChunkRoom is what a batch keeps ahead of its bytes for its chunk's size line: up to 16
// hexadecimal digits and CRLF (Taken.WriteChunk).
const ChunkRoom = 18

// TakenConns are a server's connections taken over from net/http, which its own Close does not
// close: the server closes them with CloseAll when its shutdown's grace runs out.
type TakenConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Taken is a response's connection taken over, its headers sent.
type Taken struct {
	conn  net.Conn
	conns *TakenConns
}

// Take takes over the connection of the response rc controls, whose headers (chunked, with
// "Connection: close") it has flushed; nil when net/http will not give it (HTTP/2, a writer
// that cannot). gone is called when the client closes its side: the client sends nothing more
// on a connection it was told closes, so a read ends only then (or when the connection is
// closed). Anything it sends all the same is left unread, as net/http leaves it. The caller
// must End it.
func (t *TakenConns) Take(rc *http.ResponseController, gone func()) *Taken {
	conn, _, err := rc.Hijack()
	if err != nil {
		return nil
	}
	if !t.add(conn) {
		// The server's grace ran out, and it closed the connections taken over: this one too.
		// Its writes fail, and the response ends as its client's.
		conn.Close()
	}
	go func() {
		var b [1]byte
		if _, err := conn.Read(b[:]); err != nil {
			gone()
		}
	}()
	return &Taken{conn: conn, conns: t}
}

// SetWriteDeadline sets the connection's write deadline. net/http clears a taken connection's
// deadlines: a WriteDeadline of the response's must be made anew.
func (c *Taken) SetWriteDeadline(at time.Time) error { return c.conn.SetWriteDeadline(at) }

// WriteChunk writes b[ChunkRoom:] as one chunk of the chunked body (RFC 9112, 7.1): its size in
// hexadecimal and CRLF in the room kept ahead of it, then the bytes and CRLF, in one write. It
// returns b's array, grown when it had no room for the CRLF, emptied to its room. Nothing to
// write, it writes nothing: a chunk of size 0 would end the body.
func (c *Taken) WriteChunk(b []byte) ([]byte, error) {
	n := len(b) - ChunkRoom
	if n == 0 {
		return b, nil
	}
	b = slices.Grow(b, 2)
	i := ChunkRoom - 2
	b[i], b[i+1] = '\r', '\n'
	for ; ; n >>= 4 {
		i--
		b[i] = "0123456789abcdef"[n&15]
		if n < 16 {
			break
		}
	}
	_, err := c.conn.Write(append(b, '\r', '\n')[i:])
	return b[:ChunkRoom], err
}

// End writes the body's last chunk and closes the connection.
func (c *Taken) End() {
	c.conn.Write([]byte("0\r\n\r\n"))
	c.conn.Close()
	c.conns.remove(c.conn)
}

// add keeps c, or says false when the connections were closed already.
func (t *TakenConns) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.conns == nil {
		t.conns = make(map[net.Conn]struct{})
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TakenConns) remove(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// CloseAll closes the connections kept, and those taken from now on.
func (t *TakenConns) CloseAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
}
