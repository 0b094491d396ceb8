# hangar's make targets. `make run` needs nothing but Go; `make test` wants PostgreSQL
# (HANGAR_TEST_DATABASE_URL) and a Docker engine, and skips those tests without them, listing
# each skipped test with its reason (CI always has both: see .ci/run).

GO      ?= go
BIN     ?= bin/hangar
# hangar-envd, what runs inside sandboxes (the daemon, the turn harness): beside hangar, where
# `hangar serve` looks for it (HANGAR_DAEMON_BINARY overrides).
ENVD_BIN ?= $(dir $(BIN))hangar-envd
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# Static, so the same binary runs as the daemon inside any Linux image.
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build run test lint generate clean bench

# Make's recipes run in sh; `make test` needs pipefail so go test's failure is not lost in the
# pipe.
SHELL := /bin/bash

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hangar
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ENVD_BIN) ./cmd/hangar-envd

# The first build downloads hangar's modules and compiles them: minutes on a cold cache. go
# build -v names each package it compiles; scripts/buildprogress counts them, a line every few
# seconds, so that the build does not look stuck (a warm build compiles nothing: no more lines).
run:
	@echo "building hangar (the first build downloads modules and takes a few minutes)..."
	@set -o pipefail; GOFLAGS="$$GOFLAGS -v" $(MAKE) --no-print-directory build 2>&1 | scripts/buildprogress/progress.sh
	./$(BIN) serve

# The tests run through scripts/testrun, which is `go test -json` with the test binaries built
# by `go test -c` into bin/test, kept there: go test links every test binary anew on each run
# (~2 CPU-s each, ~100 CPU-s in all: a fifth of the suite), where go test -c leaves a binary
# whose sources did not change since the last run as it is (all 53 of make test's: 108 CPU-s
# to link them, 2.2 CPU-s to find them up to date on the next run). testrun then runs as many
# binaries at once as go test would (one per CPU), each in its package's folder, with go
# test's own -count=1, -timeout and JSON events. (bin/test holds ~1 GB; make clean removes it.)
# Without -v skipped tests are hidden, so the events go through scripts/testsummary, which
# prints what go test would (ok/FAIL per package, failed tests' output, build errors), then
# each skipped test with its reason, and closes with "N passed, N failed, N skipped". Exit
# status: testrun's, or the summary's when it saw a failure (pipefail).
# (Built, not `go run`: go run would add its own "exit status 1" after the closing line.)
# -ldflags=-w: test binaries without DWARF, which no test reads; linking the ~70 of them is a
# sixth of the suite's CPU, and a fifth of each link is DWARF.
# -gcflags=modernc.org/...=-d=checkptr=0: -race turns on checkptr, a check of each unsafe
# pointer conversion, everywhere; in modernc's SQLite (C translated to Go, unsafe pointers at
# every step) it was ~15% of the CPU of the packages whose tests use SQLite. Race detection
# stays on there, and checkptr in hangar's own code.
# -vet=off: `make lint` runs all of go vet, of which go test would run a part again (~8 CPU-s).
# HANGAR_TEST_BIN: the tests run the hangar and hangar-envd built here (`make build`), rather
# than each package asking go build whether its own are up to date (~2 CPU-s a package).
# Every package but the two that have targets of their own, which CI runs after this one:
# internal/faults (make test-faults; here it would only skip) and scripts/replicas (make
# test-replicas runs its tests): a link of each less (~5 CPU-s).
TEST_PKGS = $$($(GO) list -e ./... | grep -v -x -e '.*/internal/faults' -e '.*/scripts/replicas')
test: build
	@$(GO) build -o bin/testsummary ./scripts/testsummary
	@$(GO) build -o bin/testrun ./scripts/testrun
	@set -o pipefail; HANGAR_TEST_BIN=$(abspath $(dir $(BIN))) bin/testrun -o bin/test -timeout 30m -- -race -vet=off -ldflags=-w '-gcflags=modernc.org/...=-d=checkptr=0' $(TEST_PKGS) | bin/testsummary

# The fault suite (internal/faults, docs/reliability.md): real hangars and sandboxes, local and
# Docker, under each fault (a killed daemon, a stopped container, a destroyed sandbox, a killed
# hangar, a stopped PostgreSQL of its own, a full disk, a daemon out of descriptors). It wants
# root, a Docker engine and PostgreSQL's binaries, and takes about three minutes; `make test`
# skips it.
.PHONY: test-faults
test-faults: build
	@$(GO) build -o bin/testsummary ./scripts/testsummary
	@set -o pipefail; HANGAR_TEST_FAULTS=1 HANGAR_TEST_BIN=$(abspath $(dir $(BIN))) $(GO) test -race -count=1 -timeout 15m -json ./internal/faults | bin/testsummary

# The replicas chaos test (scripts/replicas; docs/replicas.md, "The chaos test"): three `hangar
# serve` from `make build` on one PostgreSQL (HANGAR_TEST_DATABASE_URL: it skips without one, and
# fails without one in CI) behind a proxy that sends each request to a random replica, under
# load (streamed execs, attached processes, turns replaying a run log, event readers, watches,
# fleet streams), while each replica is rolled (SIGTERM, started anew) and one is killed with
# SIGKILL. It fails on a turn line lost or repeated, process output that skips or repeats
# without a gap, a 5xx outside the crash, or a hand-over or take-over over 3 s, and writes its
# figures to bench/results/<date>-replicas.json. About 3 minutes; its checker's own tests first.
.PHONY: test-replicas
test-replicas: build
	$(GO) test -race -count=1 ./scripts/replicas
	$(GO) run ./scripts/replicas -hangar $(BIN)

# staticcheck, pinned, built from the Go proxy on first use: about 80 s of CPU on a warm cache
# (a minute or two on 2 cores), longer on a cold one. Tests included.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

generate:
	scripts/generate.sh

# Stream latency and scale, written to bench/results and the table in bench/README.md; then
# the daemon's footprint and wire speed, hangar-envd beside the daemon before it (envd section);
# file watches; the Fleet page with 200 agents in headless Chromium (needs chromium); then the
# instructions a line costs, counted by valgrind's cachegrind (needs valgrind; about 8 minutes).
bench:
	$(GO) run ./scripts/bench/streams
	$(GO) run ./scripts/bench/turns
	$(GO) run ./scripts/bench/envd
	$(GO) run ./scripts/bench/watch
	$(GO) run ./scripts/bench/fleet
	$(GO) run ./scripts/bench/cpu

clean:
	rm -rf bin

# The official MCP conformance suite against `hangar serve`, both protocol revisions (needs npm;
# installs the suite and Node 22 under .cache/conformance on first use).
.PHONY: conformance
conformance:
	scripts/conformance.sh

# E2B's JS SDK (pinned in scripts/e2bcompat/package.json), unchanged: in debug mode against
# hangar-envd, asserting what E2B's envd answers; then against hangar as the E2B API and daemon
# (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; docs/e2b.md) with local sandboxes, then Docker ones
# (needs npm and a Docker engine; installs the SDK and Node 22 on first use).
.PHONY: e2b-compat
e2b-compat:
	scripts/e2bcompat/run.sh
	scripts/e2bcompat/hangar.sh local
	scripts/e2bcompat/hangar.sh docker

# The image hangar:dev (Dockerfile: FROM scratch, so the local engine builds it without pulls),
# from `make build`'s static binaries and this machine's CA bundle, put in .cache/image first.
IMAGE ?= hangar:dev
.PHONY: image image-check
image: build
	rm -rf .cache/image && mkdir -p .cache/image/data
	cp $(BIN) $(ENVD_BIN) /etc/ssl/certs/ca-certificates.crt .cache/image/
	docker build -q -f Dockerfile -t $(IMAGE) .cache/image

# Runs `hangar serve` from the image as the chart runs it (read-only root, /data on a tmpfs,
# published on 127.0.0.1 only) and checks /readyz and the image's HEALTHCHECK.
image-check: image
	scripts/image-check.sh $(IMAGE)

# helm, promtool and h2spec built from the Go proxy into .cache/tools (skipped when there).
.PHONY: tools chart-check rules-check
tools:
	scripts/tools

# helm lint and helm template over deploy/testdata's value sets, the rendered manifests checked,
# and the dashboard and rules against hangar's metrics (./deploy's tests; `make test` runs them
# too, skipping them when .cache/tools/helm is absent).
chart-check: tools
	$(GO) test -count=1 ./deploy/...

# promtool check rules and test rules over deploy/prometheus.
rules-check: tools
	.cache/tools/promtool check rules deploy/prometheus/hangar-rules.yaml
	.cache/tools/promtool test rules deploy/prometheus/hangar-rules.test.yaml

# The MCP TypeScript SDK's OAuth client (pinned in scripts/oauthts/package.json) against `hangar
# serve` with OAuth on: registration, consent, an exec with progress, a revoked grant (needs npm;
# installs the SDK and Node 22 on first use).
.PHONY: oauth-ts
oauth-ts:
	scripts/oauthts/run.sh

# The Kubernetes provider's tests against a real one-node cluster (scripts/k8s: as root, in a
# network namespace of its own; the binaries are built from the Go proxy on first use, about 14
# minutes cold, then kept in $HANGAR_K8S_CACHE or .cache/k8s), torn down afterwards.
.PHONY: test-k8s
test-k8s: build
	scripts/k8s/build
	@$(GO) build -o bin/testsummary ./scripts/testsummary
	scripts/k8s/test
