package h2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stream is one request and its response. Its fields are guarded by its connection's mu but
// for those only its handler's goroutine uses (in responseWriter).
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context // the handler's: cancelled when the stream or the connection ends
	cancel context.CancelCauseFunc
	// cond (on c.mu) is signalled when the body got data or ended, the stream's window
	// opened, or the stream ended.
	cond          sync.Cond
	body          *body // nil when the request had none
	sendWindow    int64 // what the client lets us send on the stream
	waitingWindow bool  // the handler waits for the connection's window to open
	reset         bool  // ended by a reset (either side) or the connection: writes fail
	counted       bool  // counted in c.running
}

func (c *conn) newStream(id uint32) *stream {
	ctx, cancel := context.WithCancelCause(c.base)
	st := &stream{c: c, id: id, ctx: ctx, cancel: cancel, sendWindow: c.peerWindow}
	st.cond.L = &c.mu
	return st
}

// wake signals cond, for a context.AfterFunc: a wait on cond ends when ctx does.
func (st *stream) wake() {
	st.c.mu.Lock()
	st.cond.Broadcast()
	st.c.mu.Unlock()
}

// waitLocked waits on cond, or until the handler's context ends: it reports false then.
// stop is the wait's context.AfterFunc, registered on first use (a wait is rare: windows
// are wide).
func (st *stream) waitLocked(stop *func() bool) bool {
	if *stop == nil {
		*stop = context.AfterFunc(st.ctx, st.wake)
	}
	if st.ctx.Err() != nil {
		return false
	}
	st.cond.Wait()
	return true
}

// request makes the request a HEADERS frame opened the stream with, or says why it is
// malformed (RFC 9113 8.1.1): the stream is then reset with PROTOCOL_ERROR.
func (st *stream) request(f *http2.MetaHeadersFrame) (*http.Request, error) {
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method", ":scheme", ":path", ":authority":
		default:
			return nil, fmt.Errorf("http2: the request has the pseudo-header %s", hf.Name)
		}
	}
	method, path := f.PseudoValue("method"), f.PseudoValue("path")
	scheme, authority := f.PseudoValue("scheme"), f.PseudoValue("authority")
	var u *url.URL
	switch {
	case method == "":
		return nil, errors.New("http2: the request has no :method")
	case method == "CONNECT":
		if path != "" || scheme != "" || authority == "" {
			return nil, errors.New("http2: a CONNECT request has :authority only")
		}
		u, path = &url.URL{Host: authority}, authority
	case scheme == "" || path == "":
		return nil, errors.New("http2: the request lacks :scheme or :path")
	case path == "*" && method == "OPTIONS":
		u = &url.URL{Path: "*"}
	default:
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, fmt.Errorf("http2: the request's :path %q: %w", path, err)
		}
	}

	header := make(http.Header, len(f.Fields))
	var cookies []string
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			return nil, fmt.Errorf("http2: the request has the connection-specific field %s", hf.Name)
		case "te":
			if hf.Value != "trailers" {
				return nil, errors.New(`http2: the request's te field is not "trailers"`)
			}
		case "cookie":
			cookies = append(cookies, hf.Value) // joined below (RFC 9113 8.2.3)
			continue
		}
		k := http.CanonicalHeaderKey(hf.Name)
		header[k] = append(header[k], hf.Value)
	}
	if len(cookies) > 0 {
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if authority == "" {
		authority = header.Get("Host")
	}
	delete(header, "Host")

	declared := int64(-1)
	if cl := header["Content-Length"]; len(cl) > 0 {
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil || len(cl) > 1 && !allEqual(cl) {
			return nil, errors.New("http2: the request's content-length is not a number")
		}
		declared = int64(n)
	}
	req := &http.Request{
		Method: method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2, Header: header,
		Host: authority, RequestURI: path, RemoteAddr: st.c.remote,
	}
	if f.StreamEnded() {
		if declared > 0 {
			return nil, errors.New("http2: the request has a content-length but no body")
		}
		req.Body = http.NoBody
	} else {
		st.body = &body{st: st, declared: declared, recvWindow: streamWindow}
		req.Body, req.ContentLength = st.body, declared
	}
	return req.WithContext(st.ctx), nil
}

func allEqual(vv []string) bool {
	for _, v := range vv[1:] {
		if v != vv[0] {
			return false
		}
	}
	return true
}

// run runs the handler and ends the stream after it.
func (st *stream) run(req *http.Request) {
	w := &responseWriter{st: st, head: req.Method == http.MethodHead, header: http.Header{}}
	defer st.c.handlerDone(st)
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				st.c.log.Printf("http2: panic serving %s: %v\n%s", st.c.remote, v, buf)
			}
			c := st.c
			c.mu.Lock()
			if !st.reset {
				c.resetLocked(st, http2.ErrCodeInternal, errors.New("http2: the handler panicked"))
			}
			c.unlockFlush()
			return
		}
		w.finish()
	}()
	st.c.handler.ServeHTTP(w, req)
}

// errStreamClosed is a write's error once the stream ended.
var errStreamClosed = errors.New("http2: the stream was closed")

// errBodyClosed is a read's error once the handler closed the body.
var errBodyClosed = errors.New("http2: read on a closed request body")

// body is a request's body as its DATA frames bring it.
type body struct {
	st         *stream
	buf        bytes.Buffer // received, not read yet
	declared   int64        // its content-length, or -1
	got        int64        // bytes received
	ended      bool         // the client ended the stream: the body is complete
	dropped    bool         // what arrives is dropped: the handler closed it, or the stream ended
	closed     bool         // the handler closed it
	err        error        // why it ended before its end
	recvWindow int64        // what the client may still send on the stream
	recvUnsent int64        // read, its window not given back yet
}

func (b *body) Read(p []byte) (int, error) {
	c := b.st.c
	c.mu.Lock()
	n, err := b.readLocked(p)
	c.unlockFlush()
	return n, err
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	var stop func() bool
	for b.buf.Len() == 0 && !b.ended && b.err == nil {
		if !b.st.waitLocked(&stop) {
			break
		}
	}
	if stop != nil {
		stop()
	}
	switch {
	case b.buf.Len() > 0:
		n, _ := b.buf.Read(p)
		b.st.c.giveBackLocked(b, int64(n))
		return n, nil
	case b.err != nil:
		return 0, b.err
	case b.ended:
		return 0, io.EOF
	default:
		return 0, context.Cause(b.st.ctx)
	}
}

// Close drops what the body holds and what more comes; the client is told to stop sending
// (RST_STREAM NO_ERROR) once the response is complete.
func (b *body) Close() error {
	c := b.st.c
	c.mu.Lock()
	if !b.closed {
		b.closed = true
		if !b.dropped {
			b.dropped = true
			c.giveBackLocked(nil, int64(b.buf.Len()))
			b.buf.Reset()
		}
	}
	c.unlockFlush()
	return nil
}

// responseWriter is a stream's http.ResponseWriter (and http.Flusher). Only the handler's
// goroutine uses its fields.
type responseWriter struct {
	st         *stream
	head       bool // a HEAD request: no body is sent
	header     http.Header
	status     int      // 0 until WriteHeader
	sentHeader bool     // the HEADERS frame is queued
	trailers   []string // the keys the Trailer header declared when WriteHeader was called
	buf        []byte   // written, not sent yet
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// An informational response goes at once and the final one is still to come.
		c := w.st.c
		c.mu.Lock()
		if !w.st.reset && c.werr == nil {
			c.waitRoomLocked()
			c.writeHeadersLocked(w.st.id, code, w.header, false)
		}
		c.unlockFlush()
		return
	}
	w.status = code
	for _, v := range w.header["Trailer"] {
		for k := range strings.SplitSeq(v, ",") {
			if k = textproto.TrimString(k); k != "" {
				w.trailers = append(w.trailers, http.CanonicalHeaderKey(k))
			}
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.head {
		return len(p), nil
	}
	if err := w.st.ctx.Err(); err != nil {
		return 0, context.Cause(w.st.ctx)
	}
	if len(w.buf)+len(p) > bodyChunk && len(w.buf) > 0 {
		if err := w.send(w.buf, false); err != nil {
			return 0, err
		}
		w.buf = w.buf[:0]
	}
	if len(p) >= bodyChunk {
		if err := w.send(p, false); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// WriteString saves io.WriteString a copy.
func (w *responseWriter) WriteString(s string) (int, error) {
	if len(w.buf)+len(s) <= bodyChunk && w.status != 0 && bodyAllowed(w.status) && !w.head && w.st.ctx.Err() == nil {
		w.buf = append(w.buf, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// FlushError sends what was written (and the headers, the first time).
func (w *responseWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	err := w.send(w.buf, false)
	w.buf = w.buf[:0]
	return err
}

func (w *responseWriter) Flush() { w.FlushError() }

// finish ends the response once the handler returned.
func (w *responseWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	st, c := w.st, w.st.c
	c.mu.Lock()
	if err := w.sendLocked(w.buf, true); err == nil && st.body != nil && !st.body.ended {
		// The response is complete before the request: the client may stop sending it.
		c.rstLocked(st.id, http2.ErrCodeNo)
	}
	// The stream is closed on both sides now, before the client can see its end: a frame
	// that comes for it after that finds it closed, and its place is free.
	c.closeStreamLocked(st, errors.New("http2: the response ended"))
	c.releaseLocked(st)
	c.unlockFlush()
}

func (w *responseWriter) send(data []byte, end bool) error {
	c := w.st.c
	c.mu.Lock()
	err := w.sendLocked(data, end)
	c.unlockFlush()
	return err
}

// sendLocked queues the headers (once), data as DATA frames the windows allow, and with end
// the end of the stream (after the trailers, if any).
func (w *responseWriter) sendLocked(data []byte, end bool) error {
	st, c := w.st, w.st.c
	if st.reset || c.werr != nil {
		return errStreamClosed
	}
	var trailers http.Header
	if end {
		trailers = w.trailerFields()
	}
	last := end && trailers == nil // the END_STREAM flag goes on the last DATA frame
	if !w.sentHeader {
		w.prepareHeader(data, end)
		c.waitRoomLocked()
		if st.reset || c.werr != nil {
			return errStreamClosed
		}
		c.writeHeadersLocked(st.id, w.status, w.header, last && len(data) == 0)
		w.sentHeader = true
		if last && len(data) == 0 {
			return nil
		}
	}
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for sent := false; len(data) > 0 || (last && !sent); sent = true {
		for !st.reset && c.werr == nil && len(data) > 0 && (st.sendWindow <= 0 || c.sendWindow <= 0) {
			if c.flushLocked() {
				continue // mu was let go: look again
			}
			st.waitingWindow = true
			ok := st.waitLocked(&stop)
			st.waitingWindow = false
			if !ok {
				return context.Cause(st.ctx)
			}
		}
		c.waitRoomLocked()
		if st.reset || c.werr != nil {
			return errStreamClosed
		}
		n := min(int64(len(data)), st.sendWindow, c.sendWindow, int64(c.peerFrame))
		c.out.b = appendData(c.out.b, st.id, last && n == int64(len(data)), data[:n])
		st.sendWindow -= n
		c.sendWindow -= n
		data = data[n:]
	}
	if trailers != nil {
		c.waitRoomLocked()
		if st.reset || c.werr != nil {
			return errStreamClosed
		}
		c.writeHeadersLocked(st.id, 0, trailers, true)
	}
	return nil
}

// prepareHeader completes the headers before they go: a Content-Type sniffed from the first
// bytes when the handler set none, as net/http does, and a Content-Length when the whole body
// is at hand.
func (w *responseWriter) prepareHeader(data []byte, end bool) {
	if !bodyAllowed(w.status) || w.head {
		return
	}
	if _, ok := w.header["Content-Type"]; !ok && len(data) > 0 {
		w.header.Set("Content-Type", http.DetectContentType(data))
	}
	if _, ok := w.header["Content-Length"]; !ok && end && len(w.trailers) == 0 {
		w.header.Set("Content-Length", strconv.Itoa(len(data)))
	}
}

// trailerFields are the trailers to send, or nil: the fields the Trailer header declared and
// those named with http.TrailerPrefix.
func (w *responseWriter) trailerFields() http.Header {
	var t http.Header
	add := func(k string, vv []string) {
		if t == nil {
			t = http.Header{}
		}
		t[k] = vv
	}
	for _, k := range w.trailers {
		if vv, ok := w.header[k]; ok {
			add(k, vv)
		}
	}
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(http.CanonicalHeaderKey(name), vv)
		}
	}
	return t
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == http.StatusNoContent || status == http.StatusNotModified)
}

// appendData appends a DATA frame to b.
func appendData(b []byte, id uint32, end bool, data []byte) []byte {
	var flags byte
	if end {
		flags = byte(http2.FlagDataEndStream)
	}
	n := len(data)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(http2.FrameData), flags,
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	return append(b, data...)
}

// writeHeadersLocked queues a header block: a response's headers with its status, or (status
// 0) trailers. Fields HTTP/2 forbids, and invalid ones, are left out. A block longer than the
// client's frame size goes on in CONTINUATION frames.
func (c *conn) writeHeadersLocked(id uint32, status int, h http.Header, end bool) {
	c.hbuf.Reset()
	if status != 0 {
		c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusValue(status)})
	}
	for k, vv := range h {
		switch k {
		case "Connection", "Transfer-Encoding", "Keep-Alive", "Upgrade", "Proxy-Connection":
			continue
		}
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		name := lowerKey(k)
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				c.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	block := c.hbuf.Bytes()
	for first := true; first || len(block) > 0; first = false {
		frag := block[:min(len(block), c.peerFrame)]
		block = block[len(frag):]
		if first {
			c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			c.fr.WriteContinuation(id, len(block) == 0, frag)
		}
	}
}

func statusValue(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusNoContent:
		return "204"
	}
	return strconv.Itoa(status)
}

// lowerKeys are the lowercase names of the fields hangar-envd's responses carry, so that
// sending them allocates nothing.
var lowerKeys = map[string]string{
	"Content-Type": "content-type", "Content-Length": "content-length", "Content-Encoding": "content-encoding",
	"Connect-Content-Encoding": "connect-content-encoding", "Connect-Accept-Encoding": "connect-accept-encoding",
	"Grpc-Status": "grpc-status", "Grpc-Message": "grpc-message", "Trailer": "trailer", "Date": "date",
	"Hangar-Envd": "hangar-envd", "Cache-Control": "cache-control", "Vary": "vary",
}

func lowerKey(k string) string {
	if l, ok := lowerKeys[k]; ok {
		return l
	}
	return strings.ToLower(k)
}
