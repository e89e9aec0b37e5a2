#!/usr/bin/env bash
# Builds the image from this checkout and starts the compose cluster (3 voters,
# 1 observer), then waits until every server is healthy: what `make up` does,
# for a machine without make. Usage: deploy/up.sh [IMAGE] [VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
export COORD_IMAGE=${1:-${COORD_IMAGE:-coord:local}}
compose=${COMPOSE:-$(command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)}
deploy/build-image.sh "$COORD_IMAGE" "${2:-dev}"
# The cluster key every server proves membership with (docker-compose.yml
# mounts it): made once, kept across up/down. The directory is private; the
# file is readable by the containers' user through the bind mount.
deploy/keygen.sh
$compose up -d
deploy/wait-healthy.sh
