#!/usr/bin/env bash
# Waits until every service of the compose project reports healthy (Docker's
# health check: `coord health`), up to TIMEOUT seconds (default 120).
# Usage: deploy/wait-healthy.sh [SERVICE...]; COMPOSE overrides the compose
# command (e.g. "docker-compose -p myproject").
set -euo pipefail
cd "$(dirname "$0")/.."
compose=${COMPOSE:-$(command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)}
deadline=$(( $(date +%s) + ${TIMEOUT:-120} ))
services=${*:-$($compose config --services)}
for s in $services; do
  id=""
  while :; do
    # docker inspect is quick; ask compose for the container only when needed.
    [ -n "$id" ] || id=$($compose ps -q "$s" 2>/dev/null || true)
    st=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id" 2>/dev/null) || { id=""; st=""; }
    [ "$st" = healthy ] && { echo "$s healthy"; break; }
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "wait-healthy.sh: $s is ${st:-not running}" >&2
      exit 1
    fi
    sleep 1
  done
done
