#!/bin/sh
# Regenerates the Go code of hangar's envd protocol (internal/envd/spec) with protoc and the
# plugin versions pinned as tool dependencies in go.mod. Run from anywhere; `make generate` calls it.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

command -v protoc >/dev/null 2>&1 || { echo "generate.sh: protoc is not installed (apt-get install protobuf-compiler)" >&2; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-connect-go" connectrpc.com/connect/cmd/protoc-gen-connect-go

spec=internal/envd/spec
for proto in process/process.proto filesystem/filesystem.proto; do
	PATH="$bin:$PATH" protoc \
		--proto_path="$spec" \
		--go_out="$spec" --go_opt=paths=source_relative \
		--connect-go_out="$spec" --connect-go_opt=paths=source_relative \
		"$spec/$proto"
done
echo "generate.sh: regenerated $spec"
