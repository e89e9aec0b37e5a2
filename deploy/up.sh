#!/usr/bin/env bash
# Builds the image from this checkout and starts the compose cluster (3 voters,
# 1 observer), then waits until every server is healthy: what `make up` does,
# for a machine without make. Usage: deploy/up.sh [IMAGE] [VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
export COORD_IMAGE=${1:-${COORD_IMAGE:-coord:local}}
compose=${COMPOSE:-$(command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)}
deploy/build-image.sh "$COORD_IMAGE" "${2:-dev}"
$compose up -d
deploy/wait-healthy.sh
