package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
)

const fakeAPIKey = "e2b_test_key"

// fakeE2B is an in-process stand-in for E2B: its REST API (the parts the provider uses), and its
// sandbox proxy, which routes /sbx/<sandboxID>/... to that sandbox's daemon. A sandbox is a real
// `hangar envd` process, paused with SIGSTOP.
type fakeE2B struct {
	srv     *httptest.Server
	hangar  string
	dataDir string
	proxy   *httputil.ReverseProxy

	mu        sync.Mutex // guards sandboxes and nextID
	sandboxes map[string]*fakeSandbox
	nextID    int
	// requests counts API calls by their route ("GET /v2/sandboxes"), for tests to check.
	requests map[string]int
	// proxyErrs are the proxy's errors reaching a daemon or copying its answer, for a failed
	// test's report.
	proxyErrs []string
}

// Write keeps a line of the proxy's log (a copy that broke mid-answer) for the report.
func (f *fakeE2B) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proxyErrs = append(f.proxyErrs, strings.TrimSpace(string(p)))
	return len(p), nil
}

// report logs, for a failed test, the proxy's errors and each daemon's state and log.
func (f *fakeE2B) report(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.proxyErrs {
		t.Logf("fake E2B proxy: %s", e)
	}
	for id, sb := range f.sandboxes {
		state := "running"
		if sb.exited != nil {
			select {
			case <-sb.exited:
				state = "exited: " + sb.cmd.ProcessState.String()
			default:
			}
		}
		daemonLog, _ := os.ReadFile(filepath.Join(f.dataDir, id, "envd.log"))
		t.Logf("fake E2B sandbox %s: daemon %s; its log:\n%s", id, state, daemonLog[max(0, len(daemonLog)-4096):])
	}
}

type fakeSandbox struct {
	api     apiSandbox
	envVars map[string]string
	addr    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the envd process has been waited for
}

func newFakeE2B(hangar, dataDir string) *fakeE2B {
	f := &fakeE2B{hangar: hangar, dataDir: dataDir, sandboxes: map[string]*fakeSandbox{}, requests: map[string]int{}}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			id, rest, _ := strings.Cut(strings.TrimPrefix(r.In.URL.Path, "/sbx/"), "/")
			f.mu.Lock()
			sb := f.sandboxes[id]
			f.mu.Unlock()
			target := &url.URL{Scheme: "http", Host: "127.0.0.1:1"} // nothing listens: 502
			if sb != nil {
				target.Host = sb.addr
			}
			r.SetURL(target)
			r.Out.URL.Path = "/" + rest
			r.Out.URL.RawPath = ""
		},
		// No idle connections to daemons outlive a test.
		Transport: &http.Transport{DisableKeepAlives: true},
		// E2B's envd says nothing of hangar: a client must speak HTTP/1.1 through this proxy,
		// as through E2B's, so the stand-in's mark of hangar's daemon does not pass.
		ModifyResponse: func(r *http.Response) error {
			r.Header.Del(envd.HangarHeader)
			return nil
		},
		// An unknown or dead sandbox is a 502, as at E2B; not worth a log line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.mu.Lock()
			f.proxyErrs = append(f.proxyErrs, r.URL.Path+": "+err.Error())
			f.mu.Unlock()
			w.WriteHeader(http.StatusBadGateway)
		},
		ErrorLog: log.New(f, "", 0),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", f.auth(f.create))
	mux.HandleFunc("GET /v2/sandboxes", f.auth(f.list))
	mux.HandleFunc("GET /sandboxes/{id}", f.auth(f.get))
	mux.HandleFunc("DELETE /sandboxes/{id}", f.auth(f.kill))
	mux.HandleFunc("POST /sandboxes/{id}/pause", f.auth(f.pause))
	mux.HandleFunc("POST /sandboxes/{id}/connect", f.auth(f.connect))
	// Full duplex, as E2B's own proxy is. Otherwise net/http's HTTP/1 server drains what is
	// left of a request's body once the answer begins, while the proxy's transport is still
	// reading it to send it on (a Connect stream's daemon answers as soon as it has its one
	// message, before the transport has read the body's end): the transport's copy fails, and
	// it closes the daemon's connection in the middle of the answer.
	mux.HandleFunc("/sbx/", func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			panic(err)
		}
		f.proxy.ServeHTTP(w, r)
	})
	f.srv = httptest.NewServer(mux)
	return f
}

// daemonURL is the provider's DaemonURL pattern for this fake.
func (f *fakeE2B) daemonURL() string { return f.srv.URL + "/sbx/{sandboxID}" }

// close kills every sandbox left and stops the server.
func (f *fakeE2B) close() {
	f.mu.Lock()
	left := make([]*fakeSandbox, 0, len(f.sandboxes))
	for id, sb := range f.sandboxes {
		left = append(left, sb)
		delete(f.sandboxes, id)
	}
	f.mu.Unlock()
	for _, sb := range left {
		stop(sb)
	}
	f.srv.Close()
}

func (f *fakeE2B) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[key]
}

func (f *fakeE2B) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[r.Pattern]++
		f.mu.Unlock()
		if r.Header.Get("X-API-Key") != fakeAPIKey {
			writeJSON(w, http.StatusUnauthorized, apiError{Code: 401, Message: "Invalid API key"})
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeE2B) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: 400, Message: err.Error()})
		return
	}
	if req.TemplateID != "base" {
		writeJSON(w, http.StatusNotFound, apiError{Code: 404, Message: fmt.Sprintf("template '%s' not found", req.TemplateID)})
		return
	}
	if !req.Secure || req.Timeout <= 0 {
		writeJSON(w, http.StatusBadRequest, apiError{Code: 400, Message: "test fake wants secure: true and a timeout"})
		return
	}
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf("ifake%04dx", f.nextID)
	f.mu.Unlock()
	token, _ := provider.NewAccessToken()
	sb := &fakeSandbox{
		api: apiSandbox{SandboxID: id, TemplateID: req.TemplateID, ClientID: "fakeclient", EnvdVersion: "0.6.0",
			EnvdAccessToken: token, Domain: "fake.e2b.test", State: "running", Metadata: req.Metadata},
		envVars: req.EnvVars,
	}
	if err := f.start(sb); err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{Code: 500, Message: err.Error()})
		return
	}
	f.mu.Lock()
	f.sandboxes[id] = sb
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, sb.api)
}

// start runs the sandbox's daemon and waits for its address.
func (f *fakeE2B) start(sb *fakeSandbox) error {
	dir := filepath.Join(f.dataDir, sb.api.SandboxID)
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(f.hangar, "envd", "--listen", "127.0.0.1:0", "--address-file", addrFile, "--workdir", home)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "HANGAR_ENVD_ACCESS_TOKEN=" + sb.api.EnvdAccessToken}
	for k, v := range sb.envVars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.Create(filepath.Join(dir, "envd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	sb.cmd = cmd
	sb.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(sb.exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			sb.addr = strings.TrimSpace(string(b))
			return nil
		}
		select {
		case <-sb.exited:
			return errors.New("envd exited at start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop(sb)
	return errors.New("envd wrote no address")
}

// stop kills a sandbox's daemon (SIGCONT first, in case it is paused) and waits for it.
func stop(sb *fakeSandbox) {
	_ = syscall.Kill(-sb.cmd.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-sb.cmd.Process.Pid, syscall.SIGCONT)
	<-sb.exited
}

func (f *fakeE2B) lookup(w http.ResponseWriter, r *http.Request) *fakeSandbox {
	f.mu.Lock()
	sb := f.sandboxes[r.PathValue("id")]
	f.mu.Unlock()
	if sb == nil {
		writeJSON(w, http.StatusNotFound, apiError{Code: 404, Message: fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", r.PathValue("id"))})
	}
	return sb
}

func (f *fakeE2B) get(w http.ResponseWriter, r *http.Request) {
	if sb := f.lookup(w, r); sb != nil {
		f.mu.Lock()
		api := sb.api
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, api)
	}
}

// list serves GET /v2/sandboxes: metadata and state filters, and pages of `limit` sandboxes
// with an X-Next-Token cursor.
func (f *fakeE2B) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: 400, Message: err.Error()})
		return
	}
	states := strings.Split(q.Get("state"), ",")
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	limit = min(limit, 2) // small pages, so the provider must follow the cursor
	f.mu.Lock()
	var all []apiSandbox
	for _, sb := range f.sandboxes {
		ok := q.Get("state") == "" || slices.Contains(states, sb.api.State)
		for k := range want {
			ok = ok && sb.api.Metadata[k] == want.Get(k)
		}
		if ok {
			listed := sb.api
			listed.EnvdAccessToken = "" // a listed sandbox carries no token
			all = append(all, listed)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(all, func(a, b apiSandbox) int { return strings.Compare(a.SandboxID, b.SandboxID) })
	start, _ := strconv.Atoi(q.Get("nextToken"))
	start = min(start, len(all))
	end := min(start+limit, len(all))
	if end < len(all) {
		w.Header().Set("X-Next-Token", strconv.Itoa(end))
	}
	writeJSON(w, http.StatusOK, all[start:end])
}

func (f *fakeE2B) kill(w http.ResponseWriter, r *http.Request) {
	sb := f.lookup(w, r)
	if sb == nil {
		return
	}
	f.mu.Lock()
	delete(f.sandboxes, sb.api.SandboxID)
	f.mu.Unlock()
	stop(sb)
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeE2B) pause(w http.ResponseWriter, r *http.Request) {
	sb := f.lookup(w, r)
	if sb == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb.api.State == "paused" {
		writeJSON(w, http.StatusConflict, apiError{Code: 409, Message: "sandbox is already paused"})
		return
	}
	_ = syscall.Kill(-sb.cmd.Process.Pid, syscall.SIGSTOP)
	sb.api.State = "paused"
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeE2B) connect(w http.ResponseWriter, r *http.Request) {
	sb := f.lookup(w, r)
	if sb == nil {
		return
	}
	var body struct {
		Timeout *int `json:"timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Timeout == nil {
		writeJSON(w, http.StatusBadRequest, apiError{Code: 400, Message: "timeout is required"})
		return
	}
	f.mu.Lock()
	status := http.StatusOK
	if sb.api.State == "paused" {
		_ = syscall.Kill(-sb.cmd.Process.Pid, syscall.SIGCONT)
		sb.api.State = "running"
		status = http.StatusCreated
	}
	api := sb.api
	f.mu.Unlock()
	writeJSON(w, status, api)
}
