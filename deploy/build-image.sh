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
DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build -q --build-arg "BIN=$bin" --build-arg "VERSION=$version" -t "$tag" . >/dev/null
echo "built $tag"
