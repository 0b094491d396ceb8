package main

import (
	"context"
	"testing"
	"time"
)

// TestE2BTimeout: serve ends a sandbox made through the E2B API (/e2b) once its timeout is up,
// across a restart in between (whichever of the two hangars gets there; that a hangar which did
// not make it ends it, from the store, is internal/sandbox's TestDeadlines, on a mock clock);
// one whose time is not up runs on.
func TestE2BTimeout(t *testing.T) {
	t.Parallel()
	bin := sharedEnvd(t)
	cfg := testConfig(t)
	cfg.Providers.DaemonBinary = bin
	ts := startServe(t, cfg)
	tok := adminToken(t, ts)
	code, short := ts.api(t, "POST", "/e2b/v2/sandboxes", tok, `{"templateID": "base", "timeout": 2}`)
	if code != 201 {
		t.Fatalf("create = %d %v", code, short)
	}
	code, long := ts.api(t, "POST", "/e2b/v2/sandboxes", tok, `{"templateID": "base", "timeout": 600}`)
	if code != 201 {
		t.Fatalf("create = %d %v", code, long)
	}
	shortID, longID := short["sandboxID"].(string), long["sandboxID"].(string)
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}

	ts = startServe(t, cfg)
	t.Cleanup(func() { ts.api(t, "DELETE", "/api/sandboxes/"+longID, tok, "") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		code, body := ts.api(t, "GET", "/api/sandboxes/"+shortID, tok, "")
		if code == 200 && body["state"] == "destroyed" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the sandbox whose 2 s were up is still %d %v after 30 s", code, body)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if code, body := ts.api(t, "GET", "/e2b/sandboxes/"+longID, tok, ""); code != 200 || body["state"] != "running" {
		t.Errorf("the sandbox with 600 s = %d %v, want running", code, body)
	}
}
