package e2bapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// TestGrants: an envdAccessToken stands for its hangar token's use of one sandbox: it is good
// for that sandbox only, while the token is valid and may reach it, and cannot be forged.
func TestGrants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	box := e.create(t, e.ada, `{"timeout": 300}`)
	other := e.create(t, e.ada, `{"timeout": 300}`)

	g, err := e.grants.Check(ctx, box.SandboxID, box.EnvdAccessToken)
	if err != nil {
		t.Fatalf("Check(the token create gave): %v", err)
	}
	if g.Principal.User != "ada" || g.Principal.TokenID != e.adaP.TokenID || g.Sandbox.Name != box.SandboxID || g.Sandbox.DaemonURL == "" {
		t.Errorf("grant = %+v, want ada's token on %s with its daemon's address", g, box.SandboxID)
	}
	tokenID, mac, _ := strings.Cut(box.EnvdAccessToken, ".")
	forged := tokenID + "." + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, mac)
	bobsP, _ := e.auth.Authenticate(ctx, e.bob)
	for _, c := range []struct {
		name, id, token string
		want            error
	}{
		{"another sandbox's token", other.SandboxID, box.EnvdAccessToken, e2bapi.ErrAccessDenied},
		{"a forged MAC", box.SandboxID, forged, e2bapi.ErrAccessDenied},
		{"another token id with the MAC", box.SandboxID, bobsP.TokenID + "." + mac, e2bapi.ErrAccessDenied},
		{"no MAC", box.SandboxID, tokenID, e2bapi.ErrAccessDenied},
		{"the daemon's own token", box.SandboxID, g.Sandbox.DaemonToken, e2bapi.ErrAccessDenied},
		{"no such sandbox", "e2b-nosuchsandbox", box.EnvdAccessToken, e2bapi.ErrAccessDenied},
		{"not a sandbox id", "../etc", box.EnvdAccessToken, e2bapi.ErrNoSandbox},
	} {
		if _, err := e.grants.Check(ctx, c.id, c.token); !errors.Is(err, c.want) {
			t.Errorf("%s: Check = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := e.grants.Mint(ctx, bobsP, box.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Mint for bob on ada's sandbox = %v, want not found", err)
	}

	// A paused sandbox is not running (its daemon stopped): not found until it is resumed.
	if _, err := e.sandboxes.Pause(ctx, e.adaP, box.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.grants.Check(ctx, box.SandboxID, box.EnvdAccessToken); !errors.Is(err, e2bapi.ErrNoSandbox) {
		t.Errorf("Check on a paused sandbox = %v, want ErrNoSandbox", err)
	}
	if _, err := e.sandboxes.Resume(ctx, e.adaP, box.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.grants.Check(ctx, box.SandboxID, box.EnvdAccessToken); err != nil {
		t.Errorf("Check on the resumed sandbox = %v", err)
	}

	// A killed sandbox is not found; a revoked hangar token's grants all fail.
	if a := e.do(t, "DELETE", "/sandboxes/"+other.SandboxID, e.ada, ""); a.status != 204 {
		t.Fatalf("kill: %d %s", a.status, a.raw)
	}
	otherToken := other.EnvdAccessToken
	if _, err := e.grants.Check(ctx, other.SandboxID, otherToken); !errors.Is(err, e2bapi.ErrNoSandbox) {
		t.Errorf("Check on a killed sandbox = %v, want ErrNoSandbox", err)
	}
	if _, err := e.auth.RevokeToken(ctx, e.admin, e.adaP.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.grants.Check(ctx, box.SandboxID, box.EnvdAccessToken); !errors.Is(err, e2bapi.ErrAccessDenied) {
		t.Errorf("Check after the hangar token was revoked = %v, want ErrAccessDenied", err)
	}
}

// TestGrantsNameMadeAgain: a sandbox made again under the same name is another sandbox; the old
// one's tokens do not open it.
func TestGrantsNameMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.sandboxes.Create(ctx, e.adaP, sandbox.CreateRequest{Name: "box"}); err != nil {
		t.Fatal(err)
	}
	old, err := e.grants.Mint(ctx, e.adaP, "box")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sandboxes.Destroy(ctx, e.adaP, "box"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond) // the new one's created_at differs
	if _, err := e.sandboxes.Create(ctx, e.adaP, sandbox.CreateRequest{Name: "box"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.grants.Check(ctx, e2bapi.SandboxID("box"), old); !errors.Is(err, e2bapi.ErrAccessDenied) {
		t.Errorf("Check with the old box's token on the new box = %v, want ErrAccessDenied", err)
	}
}

func TestParseTemplates(t *testing.T) {
	t.Parallel()
	ts, err := e2bapi.ParseTemplates(" base=docker:hangar-sandbox:latest, py=docker:python:3.12,gpu=e2b:my-template,dev=local")
	if err != nil {
		t.Fatal(err)
	}
	want := e2bapi.Templates{
		"base": {Provider: "docker", Image: "hangar-sandbox:latest"}, "py": {Provider: "docker", Image: "python:3.12"},
		"gpu": {Provider: "e2b", E2B: "my-template"}, "dev": {Provider: "local"},
	}
	if len(ts) != len(want) {
		t.Errorf("ParseTemplates = %v, want %v", ts, want)
	}
	for k, v := range want {
		if ts[k] != v {
			t.Errorf("template %s = %+v, want %+v", k, ts[k], v)
		}
	}
	if ts, _ := e2bapi.ParseTemplates(""); len(ts) != 1 || ts["base"] != (e2bapi.Template{}) {
		t.Errorf("ParseTemplates(\"\") = %v, want base alone, the default provider", ts)
	}
	for _, bad := range []string{"base", "base=podman:x", "Base=docker:x", "a=docker:x,a=docker:y", "dev=local:image"} {
		if _, err := e2bapi.ParseTemplates(bad); err == nil {
			t.Errorf("ParseTemplates(%q) = nil error", bad)
		}
	}
}
