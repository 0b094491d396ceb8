package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// DaemonTokenSHA256 is what a daemon is started with instead of its token
// (hangar-envd's --access-token-sha256): the token's SHA-256, in hex.
func DaemonTokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// InitDaemon gives a daemon that was started without an access token its token, through
// POST /init (as E2B's orchestrator gives envd its token). Until then the daemon takes any
// request. hangar's providers now start daemons with the token's hash (DaemonTokenSHA256), so
// this is for a daemon of a container made by an earlier hangar, found running without one.
func InitDaemon(ctx context.Context, client *http.Client, url, token string) error {
	body, err := json.Marshal(map[string]string{"accessToken": token})
	if err != nil {
		return fmt.Errorf("init daemon: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/init", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("init daemon: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// A daemon that has the token already (a second call) needs it for /init too.
	req.Header.Set("X-Access-Token", token)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("init daemon: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("init daemon: /init answered %s", resp.Status)
	}
	return nil
}

// DaemonHasToken reports whether the daemon at url refuses a request without a token: false
// means it runs without one (it was restarted outside hangar) and needs InitDaemon again.
func DaemonHasToken(ctx context.Context, client *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/files?path=/", nil)
	if err != nil {
		return false, fmt.Errorf("check daemon token: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("check daemon token: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusUnauthorized, nil
}
