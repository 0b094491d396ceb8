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

# The first build downloads hangar's modules and compiles them: minutes, silent, on a cold cache.
run:
	@echo "building hangar (the first build downloads modules and takes a few minutes)..."
	@$(MAKE) --no-print-directory build
	./$(BIN) serve

# go test's own output without -v hides skipped tests, so it runs with -json through
# scripts/testsummary, which prints what go test would (ok/FAIL per package, failed tests'
# output, build errors), then each skipped test with its reason, and closes with
# "N passed, N failed, N skipped". Exit status: go test's, or the summary's when it saw a
# failure (pipefail).
# (Built, not `go run`: go run would add its own "exit status 1" after the closing line.)
test:
	@$(GO) build -o bin/testsummary ./scripts/testsummary
	@CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(ENVD_BIN) ./cmd/hangar-envd
	@set -o pipefail; $(GO) test -race -count=1 -timeout 30m -json ./... | bin/testsummary

lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

generate:
	scripts/generate.sh

# Stream latency and scale, written to bench/results and the table in bench/README.md; then
# the daemon's footprint and wire speed, hangar-envd beside the daemon before it (envd section).
bench:
	$(GO) run ./scripts/bench/streams
	$(GO) run ./scripts/bench/turns
	$(GO) run ./scripts/bench/envd
	$(GO) run ./scripts/bench/watch

clean:
	rm -rf bin

# The official MCP conformance suite against `hangar serve`, both protocol revisions (needs npm;
# installs the suite and Node 22 under .cache/conformance on first use).
.PHONY: conformance
conformance:
	scripts/conformance.sh

# E2B's JS SDK (pinned in scripts/e2bcompat/package.json) in debug mode against hangar-envd,
# asserting what E2B's envd answers (needs npm; installs the SDK and Node 22 on first use).
.PHONY: e2b-compat
e2b-compat:
	scripts/e2bcompat/run.sh

# The MCP TypeScript SDK's OAuth client (pinned in scripts/oauthts/package.json) against `hangar
# serve` with OAuth on: registration, consent, an exec with progress, a revoked grant (needs npm;
# installs the SDK and Node 22 on first use).
.PHONY: oauth-ts
oauth-ts:
	scripts/oauthts/run.sh
