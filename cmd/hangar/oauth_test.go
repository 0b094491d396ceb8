package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestPublicURLServesOAuth: with HANGAR_PUBLIC_URL set, the metadata is served with that URL
// as the issuer and /mcp's 401 names it; without it there is neither.
func TestPublicURLServesOAuth(t *testing.T) {
	t.Parallel()
	for _, public := range []string{"https://hangar.example.com", ""} {
		cfg := testConfig(t)
		cfg.PublicURL = public
		ts := startServe(t, cfg)
		resp, err := http.Get(ts.url + "/.well-known/oauth-authorization-server")
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		resp2, err := http.Post(ts.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		challenge := resp2.Header.Get("WWW-Authenticate")
		if public == "" {
			if resp.StatusCode != http.StatusNotFound || strings.Contains(challenge, "resource_metadata") {
				t.Errorf("without a public URL: metadata %d, challenge %q; want 404 and no resource_metadata", resp.StatusCode, challenge)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || meta["issuer"] != public || meta["token_endpoint"] != public+"/oauth/token" {
			t.Errorf("metadata = %d %v", resp.StatusCode, meta)
		}
		if want := `resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp"`; resp2.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, want) {
			t.Errorf("POST /mcp = %d, WWW-Authenticate %q; want 401 naming %s", resp2.StatusCode, challenge, want)
		}
	}
}
