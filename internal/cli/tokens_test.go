package cli_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestTokens: create prints the secret once (alone on stdout), ls shows the token without it,
// the token works, revoke ends it.
func TestTokens(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := s.env(t)
	r := hangar(t, env, "", "tokens", "create", "--user", "tok-ada", "--scopes", "user,mcp", "--expires-in", "24h", "--description", "cli test").want(t, 0)
	secret := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(secret, "hgr_") || strings.Contains(secret, "\n") {
		t.Fatalf("tokens create stdout = %q, want the secret alone", r.stdout)
	}
	var list struct {
		Tokens []map[string]any `json:"tokens"`
	}
	r = hangar(t, env, "", "tokens", "ls", "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, tok := range list.Tokens {
		if tok["description"] == "cli test" {
			id = tok["id"].(string)
		}
	}
	if id == "" || strings.Contains(r.stdout, secret) {
		t.Fatalf("tokens ls -o json = %s: want the token, never its secret", r.stdout)
	}
	if r := hangar(t, env, "", "tokens", "ls").want(t, 0); !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "tok-ada") {
		t.Errorf("tokens ls = %q", r.stdout)
	}
	ada := s.env(t, "HANGAR_TOKEN="+secret)
	hangar(t, ada, "", "sandbox", "ls").want(t, 0)
	if r := hangar(t, ada, "", "tokens", "create", "--scopes", "admin").want(t, 1); !strings.Contains(r.stderr, "Only an admin can make a token with the admin scope; your token can make tokens with its own scopes (user, mcp).") {
		t.Errorf("tokens create --scopes admin as a user: %q, want it to say an admin is needed", r.stderr)
	}
	mcpOnly := strings.TrimSpace(hangar(t, env, "", "tokens", "create", "--user", "tok-ada", "--scopes", "mcp").want(t, 0).stdout)
	for _, verb := range [][]string{{"create"}, {"ls"}, {"revoke", id}} {
		r := hangar(t, s.env(t, "HANGAR_TOKEN="+mcpOnly), "", append([]string{"tokens"}, verb...)...).want(t, 1)
		if !strings.Contains(r.stderr, "needs a token with the user or admin scope; this one has mcp.") {
			t.Errorf("tokens %s with an mcp token: %q, want it to say which scope is needed", verb[0], r.stderr)
		}
	}
	hangar(t, env, "", "tokens", "revoke", id).want(t, 0)
	if r := hangar(t, ada, "", "sandbox", "ls").want(t, 1); !strings.Contains(r.stderr, "revoked") {
		t.Errorf("a revoked token's error = %q", r.stderr)
	}
}

// TestWatch: watch prints each change in a sandbox's directory as it happens.
func TestWatch(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "watch-box")
	env := s.env(t)
	b := startHangar(t, env, "watch", "watch-box", ".", "-o", "json")
	// The watch starts in its own time: touch files until the first change shows.
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		for i := 0; ; i++ {
			select {
			case <-b.done:
				return
			default:
			}
			touch := exec.Command(hangarBin, "exec", "watch-box", "--", "touch f"+strings.Repeat("x", i%3))
			touch.Env = env
			if touch.Run() != nil {
				return
			}
		}
	}()
	var ch map[string]any
	if err := json.Unmarshal([]byte(b.line(t)), &ch); err != nil || ch["seq"] != 1.0 || !strings.HasPrefix(ch["name"].(string), "f") {
		t.Fatalf("first change = %v (%v)", ch, err)
	}
	b.cmd.Process.Signal(syscall.SIGINT)
	b.rest(t)
	<-touched
}
