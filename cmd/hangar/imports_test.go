package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The direction of imports (docs/architecture.md): transports (rest, mcp) → domain (sandbox,
// process, stream) → provider, envd, store, auth. These tests ask `go list` what each package
// imports, so a stray import fails here rather than in review.

const module = "github.com/hangar-dev/hangar/"

// listed is what one `go list` said of every package under internal/ (a go list loads the
// whole module's graph: a few hundred ms of CPU each, and these tests ask of some 30 packages).
var listed struct {
	once sync.Once
	pkgs map[string]listedPackage // by path inside the module: internal/rest
	err  error
}

// listedPackage is a package's direct imports and all its dependencies, by import path.
type listedPackage struct{ imports, deps []string }

// goList returns what go list says of pkg, a path inside the module (internal/rest).
func goList(t *testing.T, pkg string) listedPackage {
	t.Helper()
	listed.once.Do(func() { listed.pkgs, listed.err = listInternal() })
	if listed.err != nil {
		t.Fatal(listed.err)
	}
	p, ok := listed.pkgs[pkg]
	if !ok {
		t.Fatalf("go list found no package %s under %sinternal", pkg, module)
	}
	return p
}

// listInternal runs go list over internal/... once: a line per package, its path, imports and
// dependencies separated by tabs.
func listInternal() (map[string]listedPackage, error) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}",
		module+"internal/...").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return nil, fmt.Errorf("go list %sinternal/...: %v %s", module, err, msg)
	}
	pkgs := map[string]listedPackage{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("go list printed %q, not a path, imports and dependencies", line)
		}
		pkgs[strings.TrimPrefix(f[0], module)] = listedPackage{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
	}
	return pkgs, nil
}

// TestAuthImportsNeitherProviderNorSDK: auth sits below the domain beside provider, and knows
// nothing of MCP (the go-sdk verifier glue lives in internal/mcp).
func TestAuthImportsNeitherProviderNorSDK(t *testing.T) {
	t.Parallel()
	for _, dep := range goList(t, "internal/auth").deps {
		if dep == module+"internal/provider" || strings.HasPrefix(dep, module+"internal/provider/") ||
			strings.HasPrefix(dep, "github.com/modelcontextprotocol/go-sdk") {
			t.Errorf("internal/auth depends on %s", dep)
		}
	}
}

// transports are the packages that serve HTTP to clients: they render the domain.
var transports = []string{"internal/rest", "internal/mcp", "internal/oauthhttp", "internal/e2bapi"}

// storeAllowed are the transports that may see a store row: the E2B API, whose daemon
// pass-through reaches a sandbox's daemon with the address and token only the row has (its
// Grant carries the row from the sandbox manager's Get).
var storeAllowed = map[string]bool{"internal/e2bapi": true}

// TestTransportsImportNeitherStoreNorEnvd: the transports reach stores and daemons only through
// the domain, whose own types they render.
func TestTransportsImportNeitherStoreNorEnvd(t *testing.T) {
	t.Parallel()
	for _, pkg := range transports {
		for _, imp := range goList(t, pkg).imports {
			for _, banned := range []string{"internal/store", "internal/envd"} {
				if banned == "internal/store" && storeAllowed[pkg] {
					continue
				}
				if imp == module+banned || strings.HasPrefix(imp, module+banned+"/") {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
}

// TestCLIImportsNoServerPackage: the client verbs (internal/cli) talk to hangar over HTTP only,
// with their own REST client: of hangar's packages they use only wire, the shapes of what
// hangar answers, stamp, its time layout, and eventtext, what its events say to a person.
func TestCLIImportsNoServerPackage(t *testing.T) {
	t.Parallel()
	allowed := []string{module + "internal/wire", module + "internal/stamp", module + "internal/eventtext"}
	for _, dep := range goList(t, "internal/cli").deps {
		if strings.HasPrefix(dep, module) && !slices.Contains(allowed, dep) {
			t.Errorf("internal/cli depends on %s", dep)
		}
	}
}

// TestEventtextImportsOnlyWire: the one formatter of events serves the domain (which serves its
// lines with each event) and the CLI alike, so it is a leaf: of hangar's packages it uses only
// wire, the shape of an event, and stamp below it.
func TestEventtextImportsOnlyWire(t *testing.T) {
	t.Parallel()
	for _, dep := range goList(t, "internal/eventtext").deps {
		if strings.HasPrefix(dep, module) && dep != module+"internal/wire" && dep != module+"internal/stamp" {
			t.Errorf("internal/eventtext depends on %s", dep)
		}
	}
}

// TestWireImportsNoHangarPackage: wire (the JSON shapes) is not a server package, so the CLI
// may use it, and a leaf, so the domain may; turning domain values into answers is wire/from's.
// Of hangar's packages it uses only stamp (the time layout), and stamp none.
func TestWireImportsNoHangarPackage(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"internal/wire", "internal/stamp"} {
		for _, dep := range goList(t, pkg).deps {
			if strings.HasPrefix(dep, module) && dep != module+"internal/stamp" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestDomainImportsNoWireFrom: the domain may use wire (a leaf of shapes: what it streams, it
// writes in them), but turning its values into answers is the transports' (wire/from, and any
// other package under wire), and the domain never reaches that.
func TestDomainImportsNoWireFrom(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"internal/sandbox", "internal/process", "internal/turns", "internal/watch", "internal/fleet", "internal/stream"} {
		for _, dep := range goList(t, pkg).deps {
			if strings.HasPrefix(dep, module+"internal/wire/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestOnlyServeImportsReplicas: the domain and the transports reach the other replicas through
// their own small interfaces (process.Owners, turns.Replicas, mcp.Replicas) and forward, which
// serve fills from package replicas; none of them depends on the leases and their database.
func TestOnlyServeImportsReplicas(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"internal/rest", "internal/mcp", "internal/sandbox", "internal/process", "internal/turns", "internal/watch", "internal/fleet", "internal/stream"} {
		for _, dep := range goList(t, pkg).deps {
			if dep == module+"internal/replicas" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestProblemImportsNoHangarPackage: the error table's mechanism sits below the domain, whose
// errors declare what they mean with it; it reaches up to none of them.
func TestProblemImportsNoHangarPackage(t *testing.T) {
	t.Parallel()
	for _, dep := range goList(t, "internal/problem").deps {
		if strings.HasPrefix(dep, module) {
			t.Errorf("internal/problem depends on %s", dep)
		}
	}
}

// TestDomainImportsNoTransport: the domain is below the transports and never reaches up; the
// OAuth server's rules (internal/oauth) serve no HTTP themselves (oauthhttp does).
func TestDomainImportsNoTransport(t *testing.T) {
	t.Parallel()
	banned := []string{"github.com/go-chi/chi/v5", "github.com/modelcontextprotocol/go-sdk/auth", "html/template"}
	for _, tr := range transports {
		banned = append(banned, module+tr)
	}
	for _, pkg := range []string{"internal/oauth", "internal/auth", "internal/problem", "internal/sandbox", "internal/process", "internal/turns", "internal/watch", "internal/fleet", "internal/stream"} {
		for _, dep := range goList(t, pkg).deps {
			if slices.Contains(banned, dep) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
