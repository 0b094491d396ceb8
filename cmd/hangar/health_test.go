package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// healthServer answers /readyz with ready's status and /healthz with 200.
func healthServer(t *testing.T, ready int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(ready)
		case "/healthz":
			w.WriteHeader(http.StatusOK)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func runHealthWith(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out bytes.Buffer
	err := runHealth(context.Background(), args, &out, &out)
	return out.String(), err
}

func TestHealthReady(t *testing.T) {
	addr := healthServer(t, http.StatusOK)
	_, port, _ := net.SplitHostPort(addr)
	// serve listens on 0.0.0.0 in a container: health asks 127.0.0.1 at the same port.
	out, err := runHealthWith(t, map[string]string{"HANGAR_LISTEN": "0.0.0.0:" + port})
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	if want := "http://127.0.0.1:" + port + "/readyz answered 200 OK: hangar is ready.\n"; out != want {
		t.Fatalf("health said %q, want %q", out, want)
	}
}

func TestHealthNotReady(t *testing.T) {
	addr := healthServer(t, http.StatusServiceUnavailable)
	_, err := runHealthWith(t, nil, "--listen", addr)
	if err == nil || !strings.Contains(err.Error(), "answered 503 Service Unavailable: hangar is not ready") {
		t.Fatalf("health on a 503: %v, want a sentence saying hangar is not ready", err)
	}
	// /healthz answers 200 while /readyz does not: the liveness question.
	out, err := runHealthWith(t, nil, "--listen", addr, "--health-path", "/healthz")
	if err != nil || !strings.HasSuffix(out, "/healthz answered 200 OK: hangar is up.\n") {
		t.Fatalf("health --health-path /healthz: %q, %v", out, err)
	}
}

func TestHealthURLAndNothingListening(t *testing.T) {
	addr := healthServer(t, http.StatusOK)
	if _, err := runHealthWith(t, nil, "--health-url", "http://"+addr+"/readyz"); err != nil {
		t.Fatalf("health --health-url: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, err = runHealthWith(t, nil, "--listen", closed)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("health with nothing listening: %v, want 'did not answer'", err)
	}
	if _, err := runHealthWith(t, nil, "--health-path", "/metrics"); err == nil {
		t.Fatal("health --health-path /metrics was accepted")
	}
}

func TestRunHealthExitCodes(t *testing.T) {
	addr := healthServer(t, http.StatusServiceUnavailable)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"health", "--listen", addr}, &out, &errOut); code != 1 {
		t.Fatalf("hangar health on a 503 exited %d, want 1 (stderr %q)", code, errOut.String())
	}
	if !strings.HasPrefix(errOut.String(), "hangar health: http://127.0.0.1:") {
		t.Fatalf("stderr %q", errOut.String())
	}
}
