#!/usr/bin/env bash
# The deploy demo end to end through docker; not part of the test suite.
#
# Usage (as root on Debian/Ubuntu): deploy/e2e_docker.sh
# Installs Debian's docker.io, docker-compose (v1) and debootstrap if missing, starts
# dockerd if no engine answers (and stops it again at the end), builds the image without
# pulling anything (deploy/build_image.sh), brings up the compose stack, runs the demo job
# through the one-shot `submit` service, checks the result, and tears the stack down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)
log() { echo "[e2e $(($(date +%s) - t0))s] $*" >&2; }

need() {  # need COMMAND PACKAGE
  command -v "$1" > /dev/null && return
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$2" > /dev/null || { apt-get update -q > /dev/null && apt-get install -y -q "$2" > /dev/null; }
}
need dockerd docker.io
need docker-compose docker-compose
need debootstrap debootstrap

dockerd_pid=""
if ! docker info > /dev/null 2>&1; then
  log "starting dockerd (log: /var/log/vfl-e2e-dockerd.log)"
  dockerd > /var/log/vfl-e2e-dockerd.log 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do docker info > /dev/null 2>&1 && break; sleep 1; done
  docker info > /dev/null
fi

compose=(docker-compose --project-directory "$here" -f "$here/compose.yml" -p vfl-e2e)
cleanup() {
  log "tearing down"
  "${compose[@]}" logs --no-color > "$here/run/e2e-compose.log" 2>&1 || true
  "${compose[@]}" --profile submit down --volumes --remove-orphans > /dev/null 2>&1 || true
  if [ -n "$dockerd_pid" ]; then kill "$dockerd_pid" && wait "$dockerd_pid" || true; fi
  log "finished"
}
trap cleanup EXIT

log "certificates"
"$here/prepare.sh"
log "image"
"$here/build_image.sh"
log "stack up"
"${compose[@]}" up -d coordinator plant cooling drive
log "demo job"
"${compose[@]}" run --rm -T submit > "$here/run/e2e-result.json"
python3 "$here/check_result.py" "$here/run/e2e-result.json"
log "ok"
