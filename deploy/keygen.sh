#!/usr/bin/env bash
# Makes the compose cluster's secrets in deploy/secrets/ if they do not exist
# yet (deploy/up.sh and `make up` call it; docker-compose.yml mounts them):
#   cluster.key     the cluster key every server proves membership with on the
#                   peer plane (raft, server-to-server calls, gossip);
#   admin.password  the superuser's password (user "super"): the admin identity
#                   coordctl's cluster commands need (COORDCTL_USER=super:PASSWORD);
#   super.digest    its digest, the servers' -super-digest-file.
# The directory is 0700 so only this user reads them on the host; cluster.key
# and super.digest are 0644 so the containers' non-root user (65532) can read
# them through the read-only bind mounts.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=deploy/secrets
mkdir -p "$dir"
chmod 700 "$dir"
bin=${BIN_DIR:-build/docker}
coord() { if [ -x "$bin/coord" ]; then "$bin/coord" "$@"; else go run ./cmd/coord "$@"; fi; }
if [ ! -s "$dir/cluster.key" ]; then
  coord keygen -o "$dir/cluster.key"
  echo "deploy/keygen.sh: made $dir/cluster.key (keep it: a server joins this cluster only with it)"
fi
chmod 644 "$dir/cluster.key"
if [ ! -s "$dir/admin.password" ]; then
  (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$dir/admin.password")
  echo "deploy/keygen.sh: made $dir/admin.password (coordctl's admin identity: COORDCTL_USER=super:\$(cat $dir/admin.password))"
fi
coord digest "super:$(cat "$dir/admin.password")" > "$dir/super.digest"
chmod 644 "$dir/super.digest"
