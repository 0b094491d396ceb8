#!/usr/bin/env bash
# E2B's JS SDK (npm e2b, pinned in package.json), unchanged, making its daemon calls through
# hangar's E2B pass-through: daemon.test.mjs. `hangar serve` runs with the local provider on a
# free loopback port; E2B_SANDBOX_URL is its /e2b/sandbox. Needs Go and npm; the SDK and a
# Node 22 are installed under scripts/e2bcompat/node_modules by `npm ci` on first use.
#
#   scripts/e2bcompat/daemon.sh
#   scripts/e2bcompat/daemon.sh --test-name-pattern=files
#   KEEP_WORK=1 scripts/e2bcompat/daemon.sh   # keep hangar's data dir and log
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

. "$root/scripts/nodekit.sh"
npm_ready "$here" e2b "E2B's SDK"

echo "--- building hangar and hangar-envd"
(cd "$root" && CGO_ENABLED=0 go build -o "$work/" ./cmd/hangar ./cmd/hangar-envd)
port=$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
url=http://127.0.0.1:$port
# Four streams per token, so that the limit test reaches it quickly.
HANGAR_LISTEN=127.0.0.1:$port HANGAR_DATA_DIR=$work/data HANGAR_STREAM_MAX_PER_TOKEN=4 \
	"$work/hangar" serve >"$work/hangar.log" 2>&1 &
pid=$!
for _ in $(seq 400); do
	[ -s "$work/data/admin-token" ] && "$node" -e "fetch('$url/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/hangar.log"; exit 1; }
	sleep 0.05
done

echo "--- E2B's SDK $(cd "$here" && "$node" -p 'require("e2b/package.json").version') through hangar at $url/e2b/sandbox"
status=0
(cd "$here" && HANGAR_URL=$url HANGAR_TOKEN=$(cat "$work/data/admin-token") E2B_SANDBOX_URL=$url/e2b/sandbox \
	"$node" --test --test-timeout=60000 "$@" daemon.test.mjs) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- hangar's log"
	tail -50 "$work/hangar.log"
fi
exit "$status"
