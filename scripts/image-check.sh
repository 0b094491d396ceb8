#!/usr/bin/env bash
# scripts/image-check.sh IMAGE: runs `hangar serve` from IMAGE on the local engine as the chart
# runs it (read-only root filesystem, /data on a tmpfs owned by 65532, every capability dropped,
# published on 127.0.0.1 only), then checks that /readyz answers 200 from the host, that the
# image's own `hangar health` says ready inside the container, and that the engine's HEALTHCHECK
# turns healthy. The container is removed whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-hangar:dev}
name=hangar-image-check-$$

cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

docker run -d --name "$name" --read-only --tmpfs /data:uid=65532,gid=65532,mode=0700 --tmpfs /tmp \
	--cap-drop ALL --security-opt no-new-privileges --health-interval 1s --health-start-period 1s \
	-p 127.0.0.1::8080 "$image" >/dev/null
port=$(docker port "$name" 8080/tcp | head -1 | sed 's/.*://')
echo "hangar serve from $image on 127.0.0.1:$port"

# fail says why, with the container's log, and exits.
fail() {
	echo "image check: $*" >&2
	docker logs "$name" 2>&1 | tail -30 >&2
	exit 1
}

# Waits up to 60 s for /readyz, asked from the host with the binary just built.
ready=
for _ in $(seq 120); do
	if bin/hangar health --health-url "http://127.0.0.1:$port/readyz" --health-timeout 2s >/dev/null 2>&1; then
		ready=1
		break
	fi
	[[ $(docker inspect -f '{{.State.Running}}' "$name") == true ]] || fail "the container stopped"
	sleep 0.5
done
[[ -n $ready ]] || fail "/readyz did not answer 200 within 60 s"
bin/hangar health --health-url "http://127.0.0.1:$port/readyz"

docker exec "$name" /usr/local/bin/hangar health || fail "hangar health inside the container failed"
[[ $(docker exec "$name" /usr/local/bin/hangar version) == hangar\ * ]] || fail "hangar version failed"
[[ $(docker inspect -f '{{.Config.User}}' "$name") == 65532:65532 ]] || fail "the image does not run as 65532"

status=
for _ in $(seq 60); do
	status=$(docker inspect -f '{{.State.Health.Status}}' "$name")
	[[ $status == healthy ]] && break
	[[ $status == unhealthy ]] && fail "the HEALTHCHECK says unhealthy"
	sleep 0.5
done
[[ $status == healthy ]] || fail "the HEALTHCHECK did not turn healthy within 30 s (last: $status)"
echo "image check: /readyz 200, hangar health ok inside, HEALTHCHECK healthy"
