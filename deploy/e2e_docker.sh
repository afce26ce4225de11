#!/usr/bin/env bash
# The deploy demo end to end through docker, checked; leaves nothing behind.
#
# Usage (as root on Debian/Ubuntu): deploy/e2e_docker.sh
# Sets up the host (deploy/host_setup.sh: docker.io, docker-compose, debootstrap, dockerd;
# a dockerd it had to start is stopped again at the end), makes the organisations' folders
# and certificates in a temporary folder outside the clone (deploy/prepare.sh), builds the
# image without pulling anything (deploy/build_image.sh), brings up the compose stack as
# its own project, runs the demo job through the one-shot `submit` service, checks the
# result, and tears the stack and the folder down. deploy/.env is neither read nor written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)
log() { echo "[e2e $(($(date +%s) - t0))s] $*" >&2; }

engine_was_up=""
docker info > /dev/null 2>&1 && engine_was_up=1
"$here/host_setup.sh"

VFL_DEPLOY=$(mktemp -d "${TMPDIR:-/tmp}/vfl-e2e.XXXXXX")
export VFL_DEPLOY VFL_UID=10001 VFL_GID=10001
compose=(docker-compose --project-directory "$here" -f "$here/compose.yml" -p vfl-e2e)
cleanup() {
  status=$?
  log "tearing down"
  if [ "$status" != 0 ]; then "${compose[@]}" logs --no-color --tail 20 >&2 2>&1 || true; fi
  "${compose[@]}" --profile submit down --volumes --remove-orphans > /dev/null 2>&1 || true
  rm -rf "$VFL_DEPLOY"
  [ -n "$engine_was_up" ] || "$here/host_setup.sh" stop
  log "finished"
}
trap cleanup EXIT

log "certificates (request in each organisation's folder, signed at the CA)"
if [ "$(id -u)" != 0 ]; then export VFL_UID=$(id -u) VFL_GID=$(id -g); fi
"$here/prepare.sh" "$VFL_DEPLOY"
log "image"
"$here/build_image.sh"
log "stack up"
"${compose[@]}" up -d coordinator plant cooling drive
log "demo job"
"${compose[@]}" run --rm -T submit > "$VFL_DEPLOY/result.json"
python3 "$here/check_result.py" "$VFL_DEPLOY/result.json"
log "ok"
