package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyTheDaemon keeps hangar-envd lean: it runs in every sandbox, so none of the
// control plane's clients and servers may creep in through a shared package. It asks `go list`
// for every package the binary links.
func TestImportsOnlyTheDaemon(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/hangar-dev/hangar/cmd/hangar-envd").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const hangar = "github.com/hangar-dev/hangar/"
	// What it may link of hangar's own: the daemon, the harness, their settings and run-log
	// reader, and what the daemon needs of the module (its protocol, its queue, sandbox names,
	// the one id helper, and its HTTP/2 server).
	allowed := []string{
		"cmd/hangar-envd", "internal/sandboxcmd", "internal/settings", "internal/envd/daemon",
		"internal/envd/spec/", "internal/queue", "internal/harness", "internal/turns/runlog", "internal/logtail",
		"internal/ids", "internal/limits", "internal/shed", "internal/h2",
	}
	banned := []string{
		"k8s.io/", "sigs.k8s.io/", "github.com/docker/", "github.com/moby/", "github.com/containerd/",
		"database/sql", "github.com/jackc/", "modernc.org/", "github.com/pressly/goose",
		"github.com/modelcontextprotocol/", "github.com/prometheus/", "go.opentelemetry.io/",
		"github.com/go-chi/", "net/rpc", "html/template", "text/template",
	}
	for _, dep := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(dep, hangar); ok {
			ok := false
			for _, a := range allowed {
				ok = ok || rest == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(rest, a))
			}
			if !ok {
				t.Errorf("hangar-envd links %s: only the daemon's packages belong in it", dep)
			}
			continue
		}
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b) {
				t.Errorf("hangar-envd links %s", dep)
			}
		}
	}
}
