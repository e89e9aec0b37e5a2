#!/usr/bin/env bash
# Builds coord's image without any image registry: static binaries on the
# host, then `docker build` of the FROM scratch Dockerfile at the repository
# root. Usage: deploy/build-image.sh [TAG] [VERSION]   (default coord:local dev)
# BIN_DIR (default build/docker, under the repository root) holds the binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-coord:local}
version=${2:-dev}
bin=${BIN_DIR:-build/docker}
mkdir -p "$bin"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bin/coord" ./cmd/coord
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bin/coordctl" ./cmd/coordctl
ca=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  if [ -s "$f" ]; then ca=$f; break; fi
done
if [ -z "$ca" ]; then
  echo "build-image.sh: no CA bundle found on this host (install ca-certificates)" >&2
  exit 1
fi
cp "$ca" "$bin/ca-certificates.crt"
# BuildKit when the buildx plugin is there (the docker CLI needs it for BuildKit), else the legacy
# builder. A DOCKER_BUILDKIT already set wins.
if [ -z "${DOCKER_BUILDKIT:-}" ]; then
  if docker buildx version >/dev/null 2>&1; then DOCKER_BUILDKIT=1; else DOCKER_BUILDKIT=0; fi
fi
export DOCKER_BUILDKIT
# The image the tag names now: once the tag moves to the new build it is left untagged (a
# dangling <none> image per build), so it is removed below.
# One build at a time on this host: removing an old image (below) removes its untagged parent
# layers, which a concurrent build may be using as its cache ("unknown parent image ID"); the
# compose test's image removal takes the same lock.
if command -v flock >/dev/null; then
  exec 9>/tmp/coord-image-build.lock
  flock 9
fi
old=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
# The legacy builder prints its deprecation banner (DEPRECATED: The legacy builder ..., up to a blank
# line) on every build; without buildx there is nothing to switch to, so it is dropped, as is the
# image id -q prints. Anything else the build printed is shown.
unbanner() {
  awk '/^DEPRECATED: The legacy builder/ {skip=1} skip && /^[[:space:]]*$/ {skip=0; next} !skip' |
    grep -v '^sha256:[0-9a-f]*$' >&2 || true
}
if ! out=$(docker build -q --build-arg "BIN=$bin" --build-arg "VERSION=$version" -t "$tag" . 2>&1); then
  printf '%s\n' "$out" | unbanner
  exit 1
fi
printf '%s\n' "$out" | unbanner
new=$(docker image inspect -f '{{.Id}}' "$tag")
if [ -n "$old" ] && [ "$old" != "$new" ] &&
  [ -z "$(docker image inspect -f '{{join .RepoTags " "}}' "$old" 2>/dev/null)" ]; then
  # Not forced: an image a container still runs (a rolling upgrade's old servers) stays.
  docker image rm "$old" >/dev/null 2>&1 || true
fi
echo "built $tag"
