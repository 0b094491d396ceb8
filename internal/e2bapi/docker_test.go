package e2bapi_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
)

// TestDockerTemplate: a template naming the docker provider and an image makes a container
// sandbox with its daemon, which kill removes. It needs a Docker engine (skipped loudly
// without one, failed in CI).
func TestDockerTemplate(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	image, err := dockertest.EnsureImage(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	dock, err := docker.New(docker.Config{EnvdBinary: hangarBin, Instance: "e2bapi-test-" + strings.ToLower(rand.Text()[:8])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dock.Close() })
	e := newEnvWith(t, "dock=docker:"+image, map[string]provider.Provider{"docker": dock})
	c := e.create(t, e.ada, `{"templateID": "dock", "timeout": 300, "envVars": {"GREETING": "hi"}}`)
	sb, err := e.sandboxes.View(context.Background(), e.adaP, c.SandboxID)
	if err != nil || sb.Provider != "docker" || sb.Image != image || !sb.HasDaemon || sb.State != "running" {
		t.Fatalf("the sandbox = %+v, %v; want a running docker sandbox of %s with a daemon", sb, err, image)
	}
	if got := e.info(t, e.ada, c.SandboxID); got.TemplateID != "dock" {
		t.Errorf("templateID = %q, want dock", got.TemplateID)
	}
	if _, err := e.grants.Check(context.Background(), c.SandboxID, c.EnvdAccessToken); err != nil {
		t.Errorf("the access token create gave: %v", err)
	}
	if a := e.do(t, "DELETE", "/sandboxes/"+c.SandboxID, e.ada, ""); a.status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", a.status, a.raw)
	}
}
