package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHealthyKeepsTheClientsTimeout: a daemon that takes the connection and never answers
// fails the health check within the provider's client's Timeout, not the caller's context
// (a sandbox's recheck would hang as long as its request).
func TestHealthyKeepsTheClientsTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers: until the client gives up, or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Healthy(ctx, &http.Client{Timeout: 100 * time.Millisecond}, srv.URL)
	if err == nil || ctx.Err() != nil {
		t.Errorf("Healthy = %v (the caller's context: %v); want it to fail on the client's timeout", err, ctx.Err())
	}
}
