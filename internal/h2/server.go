// Package h2 is hangar-envd's HTTP/2 server for cleartext connections with prior knowledge
// (h2c), the ones hangar's envd client opens; net/http goes on serving HTTP/1.1 on the same
// listener.
//
// It exists for one cost. Go's HTTP/2 servers (net/http's and x/net's) run each connection
// from a goroutine of its own: a handler's flush hands its frame to that goroutine and waits
// for the answer, and the connection goroutine writes to the socket from yet another goroutine
// it starts for every flush. That is four goroutine switches for each line a process prints,
// about half of hangar-envd's instructions a line (bench/README.md). Here a handler writes its
// frames itself: it appends them to the connection's queue under a lock, and whichever
// goroutine finds no write under way writes the queue out, others' frames included. A line
// costs no switch at all between the handler and the socket, and a connection needs no
// goroutine but the one that reads it (net/http's own for the connection).
//
// What it speaks is RFC 9113 without server push, priorities (PRIORITY frames are read and
// ignored) or CONNECT tunnels, checked by h2spec (see server_test.go). x/net's Framer and HPACK
// do the framing and the header compression; the flow control, the streams' states and the
// requests and responses are here.
package h2

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Defaults of Server's settings.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultMaxHeaderBytes       = 1 << 20
	DefaultWriteTimeout         = time.Minute
)

const (
	// streamWindow is how much of a request's body the client may send ahead of the handler
	// reading it; connWindow, of all the connection's requests together.
	streamWindow = 1 << 20
	connWindow   = 4 << 20
	// queueLimit is how many bytes of frames may wait for the socket before a writer waits for
	// them to go out: the bound of a connection's memory when its client reads slowly.
	queueLimit = 1 << 20
	// bodyChunk is how much a response buffers between flushes before it writes a frame.
	bodyChunk = 16 << 10
	// maxWindow is the largest flow-control window RFC 9113 allows.
	maxWindow = 1<<31 - 1
	// initialWindow and initialFrameSize are RFC 9113's defaults until the client's SETTINGS.
	initialWindow    = 65535
	initialFrameSize = 16384
)

// Server serves h2c connections that net/http hands it. The zero value is ready to use; its
// fields may not change once Configure was called.
type Server struct {
	// MaxConcurrentStreams bounds the requests a connection may have in flight, their handlers
	// running (DefaultMaxConcurrentStreams when 0). A request beyond it is refused
	// (REFUSED_STREAM), which clients retry; a stream the client reset counts until its
	// handler returns, so that resetting streams cannot start handlers without bound.
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds a request's header list, decoded (DefaultMaxHeaderBytes when 0); a
	// longer one is answered 431.
	MaxHeaderBytes uint32
	// WriteTimeout bounds how long a write to a connection may wait for its client to read
	// (DefaultWriteTimeout when 0); past it the connection is closed.
	WriteTimeout time.Duration

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown bool
}

// Configure has srv serve HTTP/1.1 and hand every connection that opens with HTTP/2's preface
// to s. net/http still accepts the connections and applies ReadHeaderTimeout to the preface;
// srv.Shutdown sends each of s's connections a GOAWAY and waits for their streams to end.
func (s *Server) Configure(srv *http.Server) {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = &p
	if srv.TLSNextProto == nil {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	// net/http's name for the hand-off of a cleartext connection whose preface it read: the
	// *tls.Conn only carries the net.Conn.
	srv.TLSNextProto["unencrypted_http2"] = s.serveHandoff
	// An "h2" entry keeps net/http from installing its own HTTP/2 server, over this one's
	// hand-off. HTTP/2 over TLS is not served (Protocols leaves it out, so no TLS handshake
	// picks it): should one arrive all the same, it is closed.
	srv.TLSNextProto["h2"] = func(_ *http.Server, tc *tls.Conn, _ http.Handler) { tc.Close() }
	srv.RegisterOnShutdown(s.goAway)
}

func (s *Server) serveHandoff(hs *http.Server, tc *tls.Conn, h http.Handler) {
	nc, ok := tc.NetConn().(interface{ UnencryptedNetConn() net.Conn })
	if !ok {
		tc.Close()
		return
	}
	ctx := context.Background()
	if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
		ctx = bc.BaseContext()
	}
	logger := hs.ErrorLog
	if logger == nil {
		logger = log.Default()
	}
	s.ServeConn(ctx, nc.UnencryptedNetConn(), h, logger)
}

// ServeConn serves HTTP/2 on nc, whose client preface was already read, with h, until the
// connection ends; then it closes nc. Handlers still running are told through their requests'
// contexts and may return later.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn, h http.Handler, logger *log.Logger) {
	c := newConn(s, ctx, nc, h, logger)
	if !s.track(c, true) {
		nc.Close()
		return
	}
	defer s.track(c, false)
	c.serve()
}

// track adds c to the connections a shutdown tells, or removes it. Adding fails once the
// server shut down.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.shutdown {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

// goAway sends every connection a GOAWAY: each takes no new streams and closes once its
// streams ended. New connections are closed at once.
func (s *Server) goAway() {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		c.goAwayLocked(http2.ErrCodeNo, nil)
		c.unlockFlush()
	}
}

func (s *Server) maxStreams() int {
	if s.MaxConcurrentStreams == 0 {
		return DefaultMaxConcurrentStreams
	}
	return int(s.MaxConcurrentStreams)
}

func (s *Server) maxHeaderBytes() uint32 {
	if s.MaxHeaderBytes == 0 {
		return DefaultMaxHeaderBytes
	}
	return s.MaxHeaderBytes
}

func (s *Server) writeTimeout() time.Duration {
	if s.WriteTimeout == 0 {
		return DefaultWriteTimeout
	}
	return s.WriteTimeout
}

// frameQueue is where frames are written (by x/net's Framer or appendData) to wait for the
// socket.
type frameQueue struct{ b []byte }

func (q *frameQueue) Write(p []byte) (int, error) {
	q.b = append(q.b, p...)
	return len(p), nil
}

// errConnClosed is a handler's write's error once its connection ended.
var errConnClosed = errors.New("http2: the connection closed")

// conn is one client connection. Its reading is done by the goroutine that called serve;
// everything else under mu, by whichever goroutine needs it.
type conn struct {
	s       *Server
	nc      net.Conn
	handler http.Handler
	base    context.Context
	log     *log.Logger
	remote  string        // the client's address, each request's RemoteAddr
	fr      *http2.Framer // reads from nc (serve only); writes into out (under mu)

	mu         sync.Mutex
	room       sync.Cond  // on mu: the queue was written out, or writing failed
	out        frameQueue // frames waiting for the socket
	spare      []byte     // the buffer the last write emptied, for out's next turn
	flushing   bool       // a goroutine is writing out to the socket
	roomWait   int        // goroutines waiting in room
	werr       error      // writing failed: the connection is over
	deadline   time.Time  // the socket's write deadline as last set
	henc       *hpack.Encoder
	hbuf       bytes.Buffer
	streams    map[uint32]*stream // open streams: handler running, not reset
	maxID      uint32             // the highest stream the client opened
	running    int                // streams counted against MaxConcurrentStreams (releaseLocked)
	goingAway  bool               // GOAWAY sent or received: no new streams
	sentGoAway bool               // a GOAWAY was sent
	closed     bool               // the connection ended (nc closed)
	// closeAfterFlush: the connection closes once its queue is written out (after a GOAWAY).
	closeAfterFlush bool

	sendWindow int64 // the connection's window for what we send
	peerWindow int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame  int   // the client's SETTINGS_MAX_FRAME_SIZE
	recvWindow int64 // what the client may still send us on the connection
	recvUnsent int64 // bytes read or dropped whose window is not given back yet
}

func newConn(s *Server, ctx context.Context, nc net.Conn, h http.Handler, logger *log.Logger) *conn {
	c := &conn{
		s: s, nc: nc, handler: h, base: ctx, log: logger, remote: nc.RemoteAddr().String(),
		streams:    map[uint32]*stream{},
		sendWindow: initialWindow, peerWindow: initialWindow, peerFrame: initialFrameSize,
		recvWindow: connWindow,
	}
	c.room.L = &c.mu
	c.fr = http2.NewFramer(&c.out, bufio.NewReaderSize(nc, 16<<10))
	c.fr.SetMaxReadFrameSize(initialFrameSize) // the size our SETTINGS leave as it is
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = s.maxHeaderBytes()
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// serve reads the connection's frames until it ends.
func (c *conn) serve() {
	c.mu.Lock()
	c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(c.s.maxStreams())},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.maxHeaderBytes()},
	)
	c.fr.WriteWindowUpdate(0, connWindow-initialWindow)
	c.unlockFlush()

	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if !c.readError(err) {
				break
			}
			continue
		}
		if first {
			// RFC 9113 3.4: the preface goes on with a SETTINGS frame.
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				c.fail(http2.ErrCodeProtocol, "the client's preface did not go on with SETTINGS")
				break
			}
			first = false
		}
		c.mu.Lock()
		err = c.frame(f)
		c.unlockFlush()
		done := c.isClosed()
		if err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.fail(http2.ErrCode(ce), err.Error())
			}
			break
		}
		if done {
			break
		}
	}
	c.close(errConnClosed)
}

// readError handles what the Framer reports instead of a frame and tells whether reading goes
// on: a stream's error resets that stream; anything else ends the connection.
func (c *conn) readError(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		c.mu.Lock()
		if se.StreamID > c.maxID && se.StreamID%2 == 1 {
			// A request's header block failed its checks: the stream is used up all the same.
			c.maxID = se.StreamID
		}
		if st := c.streams[se.StreamID]; st != nil {
			c.resetLocked(st, se.Code, fmt.Errorf("http2: the client's frame was invalid: %v", se))
		} else {
			c.fr.WriteRSTStream(se.StreamID, se.Code)
		}
		c.unlockFlush()
		return true
	}
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		c.fail(http2.ErrCode(ce), err.Error())
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.fail(http2.ErrCodeFrameSize, err.Error())
	}
	return false
}

// connError is a connection error: the connection ends with a GOAWAY carrying code.
func connError(code http2.ErrCode) error { return http2.ConnectionError(code) }

// frame acts on one frame the client sent. A connection error it returns ends the connection.
// Called with mu held.
func (c *conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.settings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			c.waitRoomLocked()
			c.fr.WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.RSTStreamFrame:
		if f.StreamID > c.maxID {
			return connError(http2.ErrCodeProtocol) // an idle stream (RFC 9113 6.4)
		}
		if st := c.streams[f.StreamID]; st != nil {
			c.closeStreamLocked(st, fmt.Errorf("http2: the client reset the stream (%v)", f.ErrCode))
		}
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			c.rstLocked(f.StreamID, http2.ErrCodeProtocol) // a stream cannot depend on itself
		}
	case *http2.GoAwayFrame:
		// The client opens no more streams; those open run to their end, and the client
		// closes the connection when it is done with it.
		c.goingAway = true
	case *http2.PushPromiseFrame:
		return connError(http2.ErrCodeProtocol) // clients do not push
	}
	// Anything else (unknown frame types) is ignored, as RFC 9113 4.1 asks.
	return nil
}

func (c *conn) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerWindow
			c.peerWindow = int64(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
				if st.sendWindow > maxWindow {
					return connError(http2.ErrCodeFlowControl)
				}
				st.cond.Broadcast()
			}
		case http2.SettingMaxFrameSize:
			c.peerFrame = int(s.Val)
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSize(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.waitRoomLocked()
	c.fr.WriteSettingsAck()
	return nil
}

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		c.sendWindow += inc
		if c.sendWindow > maxWindow {
			return connError(http2.ErrCodeFlowControl)
		}
		for _, st := range c.streams {
			if st.waitingWindow {
				st.cond.Broadcast()
			}
		}
		return nil
	}
	if f.StreamID > c.maxID {
		return connError(http2.ErrCodeProtocol) // an idle stream (RFC 9113 5.1)
	}
	st := c.streams[f.StreamID]
	if st == nil {
		return nil // a closed stream: frames in flight are ignored
	}
	st.sendWindow += inc
	if st.sendWindow > maxWindow {
		c.resetLocked(st, http2.ErrCodeFlowControl, errors.New("http2: the client's window for the stream grew past 2^31-1"))
		return nil
	}
	st.cond.Broadcast()
	return nil
}

// data takes a DATA frame of a request's body.
func (c *conn) data(f *http2.DataFrame) error {
	id := f.StreamID
	if id > c.maxID {
		return connError(http2.ErrCodeProtocol) // an idle stream
	}
	// The whole frame, padding included, counts against both windows (RFC 9113 6.9.1).
	n := int64(f.Length)
	if n > c.recvWindow {
		return connError(http2.ErrCodeFlowControl)
	}
	c.recvWindow -= n
	st := c.streams[id]
	if st == nil || st.body == nil || st.body.ended {
		// Closed, or half closed by the client: the frame's share of the connection's window
		// comes back, and the stream is told it is closed (RFC 9113 5.1).
		c.giveBackLocked(nil, n)
		if st != nil {
			c.resetLocked(st, http2.ErrCodeStreamClosed, errors.New("http2: the client sent data after it ended the request"))
		} else {
			c.rstLocked(id, http2.ErrCodeStreamClosed)
		}
		return nil
	}
	b := st.body
	if n > b.recvWindow {
		c.giveBackLocked(nil, n)
		c.resetLocked(st, http2.ErrCodeFlowControl, errors.New("http2: the client sent more than the stream's window"))
		return nil
	}
	b.recvWindow -= n
	data := f.Data()
	if pad := n - int64(len(data)); pad > 0 {
		c.giveBackLocked(b, pad)
	}
	b.got += int64(len(data))
	if b.declared >= 0 && b.got > b.declared {
		c.giveBackLocked(nil, int64(len(data)))
		c.resetLocked(st, http2.ErrCodeProtocol, errors.New("http2: the request's body is longer than its content-length"))
		return nil
	}
	if b.dropped {
		c.giveBackLocked(b, int64(len(data)))
	} else {
		b.buf.Write(data)
	}
	if f.StreamEnded() {
		return c.endBodyLocked(st)
	}
	st.cond.Broadcast()
	return nil
}

// endBodyLocked marks the end of st's request body.
func (c *conn) endBodyLocked(st *stream) error {
	b := st.body
	if b.declared >= 0 && b.got != b.declared {
		c.resetLocked(st, http2.ErrCodeProtocol, errors.New("http2: the request's body is shorter than its content-length"))
		return nil
	}
	b.ended = true
	st.cond.Broadcast()
	return nil
}

// headers takes a HEADERS frame: a new request, or the trailers of one.
func (c *conn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return connError(http2.ErrCodeProtocol) // streams a client opens are odd
	}
	if st := c.streams[id]; st != nil {
		// Trailers: they end the body (RFC 9113 8.1); their fields are not passed on.
		if st.body == nil || st.body.ended {
			c.resetLocked(st, http2.ErrCodeStreamClosed, errors.New("http2: the client sent headers on a stream it had ended"))
			return nil
		}
		if !f.StreamEnded() {
			c.resetLocked(st, http2.ErrCodeProtocol, errors.New("http2: the client's trailers did not end the stream"))
			return nil
		}
		return c.endBodyLocked(st)
	}
	if id <= c.maxID {
		return connError(http2.ErrCodeStreamClosed) // a stream already used (RFC 9113 5.1.1)
	}
	c.maxID = id
	if c.goingAway {
		return nil // opened after our GOAWAY: ignored, for the client to retry elsewhere
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.rstLocked(id, http2.ErrCodeProtocol)
		return nil
	}
	if c.running >= c.s.maxStreams() {
		c.rstLocked(id, http2.ErrCodeRefusedStream)
		return nil
	}
	if f.Truncated {
		// The header list was longer than MaxHeaderBytes: answered as net/http answers it.
		c.writeHeadersLocked(id, 431, nil, true)
		if !f.StreamEnded() {
			c.rstLocked(id, http2.ErrCodeNo)
		}
		return nil
	}
	st := c.newStream(id)
	req, err := st.request(f)
	if err != nil {
		st.cancel(err)
		c.rstLocked(id, http2.ErrCodeProtocol)
		return nil
	}
	c.streams[id] = st
	c.running++
	st.counted = true
	go st.run(req)
	return nil
}

// rstLocked writes a RST_STREAM frame.
func (c *conn) rstLocked(id uint32, code http2.ErrCode) {
	c.waitRoomLocked()
	c.fr.WriteRSTStream(id, code)
}

// resetLocked resets an open stream: RST_STREAM with code, and st ends with cause.
func (c *conn) resetLocked(st *stream, code http2.ErrCode, cause error) {
	c.rstLocked(st.id, code)
	c.closeStreamLocked(st, cause)
}

// closeStreamLocked ends st for both sides without writing a frame: the client reset it, or we
// did. Its handler's context is cancelled with cause, its writes fail, and what its body held
// gives its window back to the connection.
func (c *conn) closeStreamLocked(st *stream, cause error) {
	if st.reset {
		return
	}
	st.reset = true
	delete(c.streams, st.id)
	if b := st.body; b != nil {
		b.dropped = true
		if b.err == nil {
			b.err = cause
		}
		c.giveBackLocked(nil, int64(b.buf.Len()))
		b.buf.Reset()
	}
	st.cancel(cause)
	st.cond.Broadcast()
}

// giveBackLocked counts n bytes of the connection's window (and of b's, when b is set) as
// free again and sends WINDOW_UPDATE frames once a quarter of a window is.
func (c *conn) giveBackLocked(b *body, n int64) {
	c.recvUnsent += n
	if c.recvUnsent >= connWindow/4 {
		c.waitRoomLocked()
		c.fr.WriteWindowUpdate(0, uint32(c.recvUnsent))
		c.recvWindow += c.recvUnsent
		c.recvUnsent = 0
	}
	if b == nil || b.ended || b.dropped {
		return
	}
	b.recvUnsent += n
	if b.recvUnsent >= streamWindow/4 {
		c.waitRoomLocked()
		c.fr.WriteWindowUpdate(b.st.id, uint32(b.recvUnsent))
		b.recvWindow += b.recvUnsent
		b.recvUnsent = 0
	}
}

// handlerDone counts st's handler as returned.
func (c *conn) handlerDone(st *stream) {
	c.mu.Lock()
	c.closeStreamLocked(st, errors.New("http2: the handler returned"))
	c.releaseLocked(st)
	if c.goingAway && c.running == 0 && !c.closed {
		// The last stream after a GOAWAY: the connection closes once its frames are out.
		c.closeAfterFlush = true
	}
	c.unlockFlush()
}

// releaseLocked gives st's place among the MaxConcurrentStreams back (once): when its
// response ended, so that a client that saw the end may open a stream at once, or when its
// handler returned.
func (c *conn) releaseLocked(st *stream) {
	if st.counted {
		st.counted = false
		c.running--
	}
}

// goAwayLocked sends a GOAWAY with code (once): the connection takes no new streams.
func (c *conn) goAwayLocked(code http2.ErrCode, debug []byte) {
	if c.sentGoAway && code == http2.ErrCodeNo {
		return
	}
	c.goingAway, c.sentGoAway = true, true
	if c.closed || c.werr != nil {
		return
	}
	c.fr.WriteGoAway(c.maxID, code, debug)
	if c.running == 0 {
		c.closeAfterFlush = true
	}
}

// fail ends the connection with a connection error: a GOAWAY with code, then close.
func (c *conn) fail(code http2.ErrCode, why string) {
	c.mu.Lock()
	c.goAwayLocked(code, []byte(why))
	c.closeAfterFlush = true
	c.unlockFlush()
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close ends the connection: every stream's handler is told through its context.
func (c *conn) close(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(cause)
}

func (c *conn) closeLocked(cause error) {
	if c.closed {
		return
	}
	c.closed = true
	if c.werr == nil {
		c.werr = cause
	}
	c.nc.Close()
	for _, st := range c.streams {
		c.closeStreamLocked(st, cause)
	}
	c.room.Broadcast()
}

// waitRoomLocked waits while the queue is over its limit and another goroutine is writing it
// out: the bound of a connection's memory when its client does not read.
func (c *conn) waitRoomLocked() {
	for c.flushing && len(c.out.b) >= queueLimit && c.werr == nil {
		c.roomWait++
		c.room.Wait()
		c.roomWait--
	}
}

// unlockFlush unlocks mu, first writing out the queue (flushLocked).
func (c *conn) unlockFlush() {
	c.flushLocked()
	c.finishLocked()
	c.mu.Unlock()
}

// flushLocked writes out the queue, others' frames that arrive meanwhile included, unless
// another goroutine is at it; it reports whether it let go of mu meanwhile, for the socket is
// written without mu held. A goroutine about to wait calls it first, so that what it queued
// is not left waiting with it.
func (c *conn) flushLocked() bool {
	if c.flushing || c.werr != nil || len(c.out.b) == 0 {
		return false
	}
	c.flushing = true
	for len(c.out.b) > 0 && c.werr == nil {
		buf := c.out.b
		c.out.b = c.spare[:0]
		c.mu.Unlock()
		err := c.write(buf)
		c.mu.Lock()
		if cap(buf) <= 64<<10 {
			c.spare = buf[:0]
		} else {
			c.spare = nil // a burst's buffer is not kept
		}
		if err != nil && c.werr == nil {
			c.werr = fmt.Errorf("http2: write to the client: %w", err)
		}
		if c.roomWait > 0 {
			c.room.Broadcast()
		}
	}
	c.flushing = false
	if c.werr != nil {
		c.closeLocked(c.werr)
	}
	return true
}

// finishLocked closes the connection if it was to close once its frames were out and they
// are.
func (c *conn) finishLocked() {
	if c.closeAfterFlush && !c.flushing && (len(c.out.b) == 0 || c.werr != nil) {
		c.closeLocked(errConnClosed)
	}
}

// write writes buf to the socket, giving the write WriteTimeout. The deadline moves on only
// once a thirtieth of it passed, so that many small writes do not each reset the socket's
// timer. Only the goroutine that flushes calls it.
func (c *conn) write(buf []byte) error {
	timeout := c.s.writeTimeout()
	if at := time.Now().Add(timeout); at.Sub(c.deadline) > timeout/30 {
		c.nc.SetWriteDeadline(at)
		c.deadline = at
	}
	_, err := c.nc.Write(buf)
	return err
}
