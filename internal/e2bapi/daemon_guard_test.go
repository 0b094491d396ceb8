package e2bapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// recordingDaemons is a sandbox "daemon" that records what reaches it and answers with a
// cookie and an HTML page.
type recordingDaemons struct {
	srv  *httptest.Server
	seen chan *http.Request
}

func newRecordingDaemons(t *testing.T) *recordingDaemons {
	d := &recordingDaemons{seen: make(chan *http.Request, 16)}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.seen <- r.Clone(r.Context())
		w.Header().Set("Set-Cookie", "hangar-csrf=stolen; Path=/")
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<script>alert(1)</script>")
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// TestDaemonGuards: only the daemon's API that E2B's SDKs use is reached (not POST /init, which
// sets the daemon's own token, user and environment); hangar's credentials never reach the
// sandbox, while Basic authorization (the user a call runs as) does; what the sandbox answers
// sets no cookie on hangar's origin and is never sniffed into a page.
func TestDaemonGuards(t *testing.T) {
	t.Parallel()
	d := newRecordingDaemons(t)
	box := store.Sandbox{Name: "box", Owner: "ada", State: "running"}
	grants := &fakeGrants{byToken: map[string]Grant{"ada-grant": {Principal: ada, Sandbox: box}}, names: map[string]bool{"box": true}}
	streams := stream.New(stream.Config{})
	t.Cleanup(streams.Shutdown)
	srv := httptest.NewServer(NewDaemon(DaemonConfig{Grants: grants, Daemons: fixedDaemon(d.srv.URL), Streams: streams}))
	t.Cleanup(srv.Close)
	do := func(method, path string, header http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"accessToken": "mine"}`))
		if header != nil {
			req.Header = header.Clone()
		}
		req.Header.Set("E2b-Sandbox-Id", "box")
		req.Header.Set("X-Access-Token", "ada-grant")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	for _, c := range []struct{ method, path string }{
		{"POST", "/init"}, {"GET", "/envs"}, {"GET", "/metrics"}, {"DELETE", "/files"}, {"GET", "/process.Process/List"},
		{"POST", "/../init"}, {"POST", "/process.Process/../../init"}, {"POST", "/process.Process/%2e%2e/%2e%2e/init"},
		{"POST", "/process.Process%2F..%2F..%2Finit"}, {"POST", "//process.Process/List"},
	} {
		if resp := do(c.method, c.path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s = %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
	select {
	case r := <-d.seen:
		t.Fatalf("%s %s reached the daemon", r.Method, r.URL.Path)
	default:
	}

	h := http.Header{}
	h.Set("Cookie", "hangar-session=secret")
	h.Set("X-API-Key", "hgr_ada")
	h.Set("Authorization", "Bearer hgr_ada")
	resp := do("POST", "/process.Process/List", h)
	r := <-d.seen
	for _, name := range []string{"Cookie", "X-API-Key", "Authorization", "X-Access-Token", "E2b-Sandbox-Id"} {
		if v := r.Header.Get(name); v != "" {
			t.Errorf("the daemon got %s: %q", name, v)
		}
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("the answer sets a cookie on hangar's origin: %q", c)
	}
	if n := resp.Header.Get("X-Content-Type-Options"); n != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", n)
	}
	h = http.Header{}
	h.Set("Authorization", "Basic dXNlcjo=")
	do("POST", "/process.Process/List", h)
	if r := <-d.seen; r.Header.Get("Authorization") != "Basic dXNlcjo=" {
		t.Errorf("the daemon got Authorization %q, want the Basic one (the user a call runs as)", r.Header.Get("Authorization"))
	}
	for _, c := range []struct{ method, path string }{{"GET", "/health"}, {"GET", "/files"}, {"POST", "/files"}, {"POST", "/filesystem.Filesystem/Stat"}} {
		if resp := do(c.method, c.path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s = %d, want 200 (passed)", c.method, c.path, resp.StatusCode)
		}
		if r := <-d.seen; r.URL.Path != c.path {
			t.Errorf("%s %s reached the daemon as %s", c.method, c.path, r.URL.Path)
		}
	}
}

// TestEndedBeforeHeaders: a stream the registry ends (its token revoked) before the daemon has
// answered tells the SDK why in Connect's end-of-stream message, as one ended later does, not
// with a bare 503 the SDK would read as "the sandbox is not running".
func TestEndedBeforeHeaders(t *testing.T) {
	t.Parallel()
	reached, done := make(chan struct{}), make(chan struct{})
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(reached)
		select { // never answers: hangar gives up on it
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(daemon.Close)
	t.Cleanup(func() { close(done) })
	box := store.Sandbox{Name: "box", Owner: "ada", State: "running"}
	grants := &fakeGrants{byToken: map[string]Grant{"ada-grant": {Principal: ada, Sandbox: box}}, names: map[string]bool{"box": true}}
	streams := stream.New(stream.Config{})
	t.Cleanup(streams.Shutdown)
	srv := httptest.NewServer(NewDaemon(DaemonConfig{Grants: grants, Daemons: fixedDaemon(daemon.URL), Streams: streams}))
	t.Cleanup(srv.Close)
	go func() { <-reached; streams.EndToken(ada.TokenID) }()
	req, _ := http.NewRequest("POST", srv.URL+"/process.Process/Start", strings.NewReader("\x00\x00\x00\x00\x02{}"))
	req.Header.Set("E2b-Sandbox-Id", "box")
	req.Header.Set("X-Access-Token", "ada-grant")
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"code":"unauthenticated"`) {
		t.Errorf("a Start whose token was revoked before the daemon answered = %d %q, want 200 and an unauthenticated end of stream", resp.StatusCode, body)
	}
}

// fixedDaemon reaches every sandbox's daemon at one URL.
type fixedDaemon string

func (f fixedDaemon) DaemonPassthrough(store.Sandbox) (*url.URL, http.RoundTripper, error) {
	u, err := url.Parse(string(f))
	return u, http.DefaultTransport, err
}

func (fixedDaemon) KillDaemonProcess(context.Context, store.Sandbox, uint32) error { return nil }
