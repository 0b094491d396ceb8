package envd_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// protoServer serves h on 127.0.0.1:0 with the given protocols until the test ends, and
// records the HTTP versions of the requests it gets.
type protoServer struct {
	url    string
	mu     sync.Mutex
	protos map[string]int // "HTTP/1.1" or "HTTP/2.0" → requests
}

func serveProtocols(t *testing.T, h http.Handler, h1, h2c bool) *protoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := &protoServer{url: "http://" + ln.Addr().String(), protos: map[string]int{}}
	var p http.Protocols
	p.SetHTTP1(h1)
	p.SetUnencryptedHTTP2(h2c)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.mu.Lock()
		ps.protos[r.Proto]++
		ps.mu.Unlock()
		h.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	t.Cleanup(func() { srv.Close(); <-served })
	return ps
}

func (ps *protoServer) count(proto string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.protos[proto]
}

// e2bLike is a daemon as E2B's envd shows itself: a /health without hangar's header.
func e2bLike(d *daemon.Daemon) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		d.Handler().ServeHTTP(w, r)
	})
}

// TestProtocolNegotiation: over http://, the client speaks h2c to hangar's daemon and
// HTTP/1.1 to a daemon that serves only HTTP/1.1 in cleartext, as E2B's envd does; each
// stream, call and upload works with either.
func TestProtocolNegotiation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		hangar    bool // the daemon says it is hangar's on /health
		h2c       bool // the server speaks h2c too
		wantProto string
		protocol  envd.Protocol
	}{
		{"hangar's daemon", true, true, "HTTP/2.0", envd.ProtocolAuto},
		{"E2B's envd, HTTP/1.1 only", false, false, "HTTP/1.1", envd.ProtocolAuto},
		{"forced HTTP/1.1", true, true, "HTTP/1.1", envd.ProtocolHTTP1},
		{"forced h2c", false, true, "HTTP/2.0", envd.ProtocolH2C},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemon.New(daemon.Config{AccessToken: "tok", Workdir: t.TempDir()})
			t.Cleanup(d.Close)
			h := d.Handler()
			if !tc.hangar {
				h = e2bLike(d)
			}
			ps := serveProtocols(t, h, true, tc.h2c)
			c, err := envd.New(envd.Config{URL: ps.url, AccessToken: "tok", Protocol: tc.protocol})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			ctx := testCtx(t, shortWait)
			if r := run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "echo hi"}}); string(r.stdout) != "hi\n" || r.exit.Code != 0 {
				t.Errorf("run: %q %+v", r.stdout, r.exit)
			}
			if _, err := c.List(ctx); err != nil {
				t.Errorf("list: %v", err)
			}
			// A client stream (StreamInput) works over HTTP/1.1 too.
			s, err := c.Start(ctx, envd.StartRequest{Cmd: "cat", Stdin: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in, err := c.StreamInput(ctx, envd.ByPID(s.PID()), false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Write([]byte("streamed")); err != nil {
				t.Fatal(err)
			}
			if err := in.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.CloseStdin(ctx, envd.ByPID(s.PID())); err != nil {
				t.Fatal(err)
			}
			if r := collect(t, s); string(r.stdout) != "streamed" {
				t.Errorf("cat of streamed input: %q", r.stdout)
			}
			if err := c.Upload(ctx, "f.txt", strings.NewReader("x")); err != nil {
				t.Errorf("upload: %v", err)
			}
			other := "HTTP/2.0"
			if tc.wantProto == other {
				other = "HTTP/1.1"
			}
			// The probe of ProtocolAuto is the only request allowed in HTTP/1.1 to an h2c daemon.
			allowed := 0
			if tc.protocol == envd.ProtocolAuto && other == "HTTP/1.1" {
				allowed = 1
			}
			if ps.count(tc.wantProto) < 3 || ps.count(other) > allowed {
				t.Errorf("requests by protocol: %v, want %s", ps.protos, tc.wantProto)
			}
		})
	}
}

// TestNoCompressionAsked: the client asks no daemon to compress what it sends back (issue 31:
// E2B's envd gzips every output line when asked, as connect-go's client does by default), on
// a stream, a unary call or its HTTP/1.1 form alike.
func TestNoCompressionAsked(t *testing.T) {
	t.Parallel()
	for _, protocol := range []envd.Protocol{envd.ProtocolH2C, envd.ProtocolHTTP1} {
		d := daemon.New(daemon.Config{AccessToken: "tok", Workdir: t.TempDir()})
		t.Cleanup(d.Close)
		var mu sync.Mutex
		asked := map[string][]string{} // path → the compressions asked for
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			for _, k := range []string{"Connect-Accept-Encoding", "Grpc-Accept-Encoding"} {
				if v := r.Header.Get(k); v != "" {
					asked[r.URL.Path] = append(asked[r.URL.Path], k+": "+v)
				}
			}
			mu.Unlock()
			d.Handler().ServeHTTP(w, r)
		})
		ps := serveProtocols(t, h, true, true)
		c, err := envd.New(envd.Config{URL: ps.url, AccessToken: "tok", Protocol: protocol})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		ctx := testCtx(t, shortWait)
		if r := run(t, ctx, c, envd.StartRequest{Cmd: "sh", Args: []string{"-c", "echo hi"}}); string(r.stdout) != "hi\n" {
			t.Errorf("protocol %d: run: %q", protocol, r.stdout)
		}
		if _, err := c.List(ctx); err != nil {
			t.Errorf("protocol %d: list: %v", protocol, err)
		}
		mu.Lock()
		if len(asked) > 0 {
			t.Errorf("protocol %d: the client asked the daemon for compression: %v", protocol, asked)
		}
		mu.Unlock()
	}
}
