# hangar's make targets. `make run` needs nothing but Go; `make test` wants PostgreSQL
# (HANGAR_TEST_DATABASE_URL) and a Docker engine, and skips those tests loudly without them
# (CI always has both: see .ci/run).

GO      ?= go
BIN     ?= bin/hangar
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# Static, so the same binary runs as the daemon inside any Linux image.
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build run test lint generate clean bench

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hangar

run: build
	./$(BIN) serve

test:
	$(GO) test -race -count=1 -timeout 30m ./...

lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

generate:
	scripts/generate.sh

# Stream latency and scale, written to bench/results and the table in bench/README.md.
bench:
	$(GO) run ./scripts/bench/streams

clean:
	rm -rf bin

# The official MCP conformance suite against `hangar serve`, both protocol revisions (needs npm;
# installs the suite and Node 22 under .cache/conformance on first use).
.PHONY: conformance
conformance:
	scripts/conformance.sh

# E2B's JS SDK (pinned in scripts/e2bcompat/package.json) in debug mode against `hangar envd`,
# asserting what E2B's envd answers (needs npm; installs the SDK and Node 22 on first use).
.PHONY: e2b-compat
e2b-compat:
	scripts/e2bcompat/run.sh
