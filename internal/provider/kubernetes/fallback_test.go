package kubernetes

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
)

// TestWebsocketRefusedFallsBack: what client-go answers when an API server refuses the
// websocket upgrade (an old server, or a proxy in between) is what makes exec and port-forward
// fall back to SPDY.
func TestWebsocketRefusedFallsBack(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no websockets here", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	cfg := &restclient.Config{Host: srv.URL}
	u, err := url.Parse(srv.URL + "/api/v1/namespaces/ns/pods/p/exec")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	err = ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || !websocketRefused(err) {
		t.Errorf("exec over a refused websocket: %v; want an error that makes the fallback", err)
	}

	dialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if conn, _, err := dialer.Dial("portforward.k8s.io"); err == nil || !websocketRefused(err) {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("port-forward over a refused websocket: %v; want an error that makes the fallback", err)
	}
}
