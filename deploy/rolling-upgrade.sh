#!/usr/bin/env bash
# Rolling upgrade of the compose cluster to the image COORD_IMAGE (already
# built, e.g. by `make upgrade`): one container at a time, observers first,
# then followers, the leader last after handing leadership to another voter.
# Each server is stopped with SIGTERM (a clean shutdown), recreated from the
# new image on the same volume and address, and must be healthy and caught up
# (its applied index within 64 entries of the
# leader's in `coordctl status`) before the next one goes. A majority of voters
# is up throughout, so no acknowledged write is lost, and each outage is a few
# seconds, far below the session timeouts: clients connected to the server
# being replaced move to another server and keep their sessions.
set -euo pipefail
cd "$(dirname "$0")/.."
compose=${COMPOSE:-$(command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)}
: "${COORD_IMAGE:?set COORD_IMAGE to the new image}"
export COORD_IMAGE
timeout=${TIMEOUT:-120}

services=$($compose config --services)
# Container ids, looked up once per service and again after it is replaced
# (docker exec is much quicker than compose exec).
declare -A cid
refresh() { cid[$1]=$($compose ps -q "$1"); }
for s in $services; do refresh "$s"; done
# move-leader needs an admin identity: COORDCTL_USER (the servers'
# -super-digest user:password; by default the superuser deploy/keygen.sh
# made) is passed on to coordctl in the container through the environment
# (not on a command line).
if [ -z "${COORDCTL_USER:-}" ] && [ -s deploy/secrets/admin.password ]; then
  COORDCTL_USER="super:$(cat deploy/secrets/admin.password)"
  export COORDCTL_USER
fi
ctl() { # ctl SERVICE ARGS...: coordctl inside SERVICE's container
  local s=$1; shift
  if [ -n "${COORDCTL_USER:-}" ]; then
    docker exec -e COORDCTL_USER "${cid[$s]}" coordctl --command-timeout 10s "$@"
  else
    docker exec "${cid[$s]}" coordctl --command-timeout 10s "$@"
  fi
}
anyup() { # a service other than $1 to ask
  for o in $services; do [ "$o" != "$1" ] && { echo "$o"; return; }; done
}
first=$(anyup none)
leader=$(ctl "$first" leader | cut -d' ' -f1)
observers=$(ctl "$first" members -o table | awk 'NR>1 && $2=="observer" {print $1}')
order=""
for s in $observers; do order="$order $s"; done
for s in $services; do
  case " $order $leader " in *" $s "*) ;; *) order="$order $s" ;; esac
done
order="$order $leader"
echo "upgrading to $COORD_IMAGE in the order:$order"

for s in $order; do
  other=$(anyup "$s")
  if [ "$(ctl "$other" leader | cut -d' ' -f1)" = "$s" ]; then
    ctl "$other" move-leader
  fi
  echo "== $s"
  $compose up -d --no-deps "$s"
  refresh "$s"
  TIMEOUT=$timeout deploy/wait-healthy.sh "$s"
  deadline=$(( $(date +%s) + timeout ))
  # Caught up: within 64 entries of what the leader has applied (a leader's
  # commit index also counts raft's own entries, which no FSM applies).
  until ctl "$other" status -o table | awk -v s="$s" '
      $3=="leader" {l=$7} $1==s && $7 ~ /^[0-9]+$/ {a=$7}
      END {exit !(l != "" && a != "" && a+64 >= l)}'; do
    [ "$(date +%s)" -ge "$deadline" ] && { echo "rolling-upgrade.sh: $s did not catch up" >&2; exit 1; }
    sleep 1
  done
  echo "$s runs $(docker inspect -f '{{.Config.Image}}' "${cid[$s]}") and is caught up"
done
ctl "$first" status -o table
