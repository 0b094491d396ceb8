package h2_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hangar-dev/hangar/internal/h2"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves h with s (h2c and HTTP/1.1) on a loopback port until the test ends, and
// returns the address and the http.Server.
func serve(t *testing.T, s *h2.Server, h http.Handler) (string, *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	s.Configure(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String(), srv
}

// client speaks h2c with prior knowledge: net/http's transport (hangar's envd client is
// x/net's, which the daemon's own tests use).
func client(t *testing.T) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestRequestAndResponse: a body larger than every window goes both ways whole, and the
// handler sees the request as net/http would give it.
func TestRequestAndResponse(t *testing.T) {
	t.Parallel()
	type seen struct {
		proto, host, remote, path, query, ua string
		length                               int64
	}
	got := make(chan seen, 1)
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Proto, r.Host, r.RemoteAddr, r.URL.Path, r.URL.RawQuery, r.UserAgent(), r.ContentLength}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Echo", "yes")
		io.Copy(w, r.Body)
	}))
	body := make([]byte, 9<<20+123) // past the stream's (1 MiB) and the connection's (4 MiB) windows
	rand.Read(body)
	req, _ := http.NewRequest("POST", "http://"+addr+"/echo?x=1", bytes.NewReader(body))
	req.Header.Set("User-Agent", "h2-test")
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	echoed, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.Header.Get("X-Echo") != "yes" {
		t.Errorf("response: %d %s %v", resp.StatusCode, resp.Proto, resp.Header)
	}
	if !bytes.Equal(echoed, body) {
		t.Errorf("echoed %d bytes, different from the %d sent", len(echoed), len(body))
	}
	s := <-got
	if s.proto != "HTTP/2.0" || s.host != addr || s.path != "/echo" || s.query != "x=1" || s.ua != "h2-test" ||
		s.length != int64(len(body)) || !strings.HasPrefix(s.remote, "127.0.0.1:") {
		t.Errorf("the handler saw %+v", s)
	}
}

// TestFlushedLinesArriveOneByOne: each Flush reaches the client while the handler waits, and
// a response with no Content-Type gets one sniffed, as from net/http.
func TestFlushedLinesArriveOneByOne(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	}))
	resp, err := client(t).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q, want the sniffed text/plain", ct)
	}
	buf := make([]byte, 64)
	for i := range 3 {
		n, err := io.ReadAtLeast(resp.Body, buf, len("line 0\n"))
		if err != nil || string(buf[:n]) != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("read %q, %v; want line %d before the handler goes on", buf[:n], err, i)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("after the lines: %q, %v", rest, err)
	}
}

// TestClientGoneCancelsHandler: a client that cancels its request resets the stream, and the
// handler's context ends with the reason.
func TestClientGoneCancelsHandler(t *testing.T) {
	t.Parallel()
	cause := make(chan error, 1)
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	if err := <-cause; err == nil || !strings.Contains(err.Error(), "reset the stream") {
		t.Errorf("the handler's context ended with %v, want the client's reset", err)
	}
}

// TestTrailers: trailers declared in the Trailer header, or named with http.TrailerPrefix,
// follow the body (as gRPC's status does).
func TestTrailers(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		io.WriteString(w, "body")
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	}))
	resp, err := client(t).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "body" || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("X-Late") != "late" {
		t.Errorf("body %q, trailers %v", b, resp.Trailer)
	}
}

// TestPanicResetsOnlyItsStream: a handler's panic resets its own stream; the connection goes
// on serving.
func TestPanicResetsOnlyItsStream(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler) // not logged, as in net/http
		}
		io.WriteString(w, "fine")
	}))
	c := client(t)
	if resp, err := c.Get("http://" + addr + "/panic"); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a panicking handler's response ended as if complete")
		}
	}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fine" {
		t.Errorf("after the panic: %q", b)
	}
}

// TestHTTP1Beside: the same port still serves HTTP/1.1.
func TestHTTP1Beside(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/1.1" {
		t.Errorf("served %q", b)
	}
}

// rawConn is a client that writes and reads frames itself, for what x/net's transport never
// does (more streams than the server allows).
type rawConn struct {
	t   *testing.T
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	r := &rawConn{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.buf)
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return r
}

// get opens stream id with a GET of path.
func (r *rawConn) get(id uint32, path string) {
	r.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", path}, {":authority", "test"}} {
		r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		r.t.Fatal(err)
	}
}

// until reads frames until match says it was the one looked for.
func (r *rawConn) until(what string, match func(http2.Frame) bool) {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return
		}
	}
}

// ends reports whether f ends stream id: HEADERS or DATA with END_STREAM.
func ends(f http2.Frame, id uint32) bool {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return f.StreamID == id && f.StreamEnded()
	case *http2.DataFrame:
		return f.StreamID == id && f.StreamEnded()
	}
	return false
}

// TestRefusedBeyondMaxStreams: a stream past MaxConcurrentStreams is refused, a stream the
// client reset still counts until its handler returns, and a refused client is served once
// a handler returned.
func TestRefusedBeyondMaxStreams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan string, 8)
	addr, _ := serve(t, &h2.Server{MaxConcurrentStreams: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.URL.Path
		if r.URL.Path == "/hold" {
			<-release
		}
	}))
	r := dialRaw(t, addr)
	r.get(1, "/hold")
	r.get(3, "/hold")
	<-started
	<-started
	if err := r.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	r.get(5, "/now") // stream 1's handler still runs: refused
	r.until("stream 5's RST_STREAM", func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		if ok && rst.StreamID == 5 && rst.ErrCode != http2.ErrCodeRefusedStream {
			t.Fatalf("stream 5 reset with %v, want REFUSED_STREAM", rst.ErrCode)
		}
		return ok && rst.StreamID == 5
	})
	close(release)
	// Stream 3 ends; its place is free once the client sees that, whether stream 1's handler
	// returned yet or not.
	r.until("stream 3's end", func(f http2.Frame) bool { return ends(f, 3) })
	r.get(7, "/now")
	if p := <-started; p != "/now" {
		t.Errorf("started %s", p)
	}
	r.until("stream 7's end", func(f http2.Frame) bool {
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 7 {
			t.Fatalf("stream 7 reset with %v", rst.ErrCode)
		}
		return ends(f, 7)
	})
}

// TestShutdownSendsGoAway: srv.Shutdown sends a GOAWAY; the stream open runs to its end and the
// connection then closes.
func TestShutdownSendsGoAway(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	addr, srv := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "done")
	}))
	r := dialRaw(t, addr)
	r.get(1, "/")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	r.until("the GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && (g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1) {
			t.Errorf("GOAWAY %v, last stream %d", g.ErrCode, g.LastStreamID)
		}
		return ok
	})
	close(release)
	var body []byte
	r.until("stream 1's end", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		if ok {
			body = append(body, d.Data()...)
		}
		return ok && d.StreamEnded()
	})
	if string(body) != "done" {
		t.Errorf("stream 1's body %q", body)
	}
	if _, err := r.fr.ReadFrame(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Errorf("after the last stream: %v, want the connection closed", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

// TestH2Spec runs h2spec, HTTP/2's conformance suite, strict cases included, against the
// server. The one case it fails is net/http's, not this server's: a connection whose preface
// is not HTTP/2's is HTTP/1.1 to net/http, answered 400 before it is closed, where h2spec
// wants it closed without a word.
func TestH2Spec(t *testing.T) {
	t.Parallel()
	bin := h2spec(t)
	addr, _ := serve(t, &h2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("h2spec ", 100))
	}))
	_, port, _ := net.SplitHostPort(addr)
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	out, err := exec.Command(bin, "--strict", "-h", "127.0.0.1", "-p", port, "-j", report, "-o", "5").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("h2spec: %v\n%s", err, out)
	}
	raw, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatalf("h2spec wrote no report (%v):\n%s", rerr, out)
	}
	var suites struct {
		Suites []struct {
			ID    string `xml:"package,attr"`
			Cases []struct {
				Desc    string    `xml:"classname,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &suites); err != nil {
		t.Fatalf("h2spec's report: %v", err)
	}
	const known = "http2/3.5: Sends invalid connection preface"
	passed := 0
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			switch name := s.ID + ": " + c.Desc; {
			case c.Failure == nil && c.Error == nil && c.Skipped == nil:
				passed++
			case name == known:
			default:
				t.Errorf("h2spec failed: %s", name)
			}
		}
	}
	if passed < 140 {
		t.Errorf("h2spec passed %d cases, want 140 or more:\n%s", passed, out)
	}
	t.Logf("h2spec: %d cases passed", passed)
}

// h2spec finds the h2spec that scripts/tools builds, or skips loudly (fails in CI, which
// builds it before make test).
func h2spec(t *testing.T) string {
	if p := os.Getenv("HANGAR_H2SPEC"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "tools", "h2spec")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("h2spec is not built (%v): .ci/run runs scripts/tools before make test", err)
		}
		t.Skipf("SKIPPED: h2spec is not built (%v): run scripts/tools (CI does), or set HANGAR_H2SPEC", err)
	}
	return p
}

// TestClientThatDoesNotRead: a client that opens the windows wide and then reads nothing
// holds a handler's writes only until WriteTimeout; then the connection is closed and the
// handler's write fails, rather than the handler (or the queue's memory) waiting for ever.
func TestClientThatDoesNotRead(t *testing.T) {
	t.Parallel()
	failed := make(chan error, 1)
	addr, _ := serve(t, &h2.Server{WriteTimeout: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	}))
	r := dialRaw(t, addr)
	if err := r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		t.Fatal(err)
	}
	r.get(1, "/")
	if err := <-failed; err == nil {
		t.Fatal("the handler's write did not fail")
	}
}
