#!/usr/bin/env bash
# What a host needs for the compose demo, installed and started (as root, Debian/Ubuntu).
#
# Usage: deploy/host_setup.sh
#   - the Docker engine and docker-compose: Debian's docker.io and docker-compose (v1)
#   - debootstrap: deploy/build_image.sh makes the base image's root filesystem with it
#   - a running dockerd: if no engine answers, starts one in the background without
#     systemd (log /var/log/vfl-dockerd.log, pid /run/vfl-dockerd.pid); `deploy/host_setup.sh
#     stop` stops that one again (never an engine it did not start)
# Installs only what is missing; prints what it did. Nothing is written into the clone.
set -euo pipefail
log() { echo "host: $*" >&2; }
pidfile=/run/vfl-dockerd.pid

if [ "${1:-}" = stop ]; then
  if [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2> /dev/null; then
    log "stopping the dockerd this script started (pid $(cat "$pidfile"))"
    for _ in $(seq 30); do kill -0 "$(cat "$pidfile")" 2> /dev/null || break; sleep 1; done
  fi
  rm -f "$pidfile"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "error: run deploy/host_setup.sh as root (it installs packages and starts dockerd)" >&2
  exit 2
fi

missing=()
command -v dockerd > /dev/null || missing+=(docker.io)
command -v docker-compose > /dev/null || missing+=(docker-compose)
command -v debootstrap > /dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get -q -o DPkg::Lock::Timeout=600)  # waits for another apt run to finish
  "${apt[@]}" update > /dev/null
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" > /dev/null
fi

if docker info > /dev/null 2>&1; then
  log "docker engine $(docker version --format '{{.Server.Version}}') is running"
else
  log "starting dockerd (no systemd needed; log /var/log/vfl-dockerd.log)"
  setsid dockerd > /var/log/vfl-dockerd.log 2>&1 < /dev/null &
  echo $! > "$pidfile"
  for _ in $(seq 60); do docker info > /dev/null 2>&1 && break; sleep 1; done
  if ! docker info > /dev/null 2>&1; then
    echo "error: dockerd did not start; see /var/log/vfl-dockerd.log" >&2
    tail -5 /var/log/vfl-dockerd.log >&2
    exit 3
  fi
  log "docker engine $(docker version --format '{{.Server.Version}}') started (pid $(cat "$pidfile"))"
fi
log "ready: $(docker-compose version --short 2>/dev/null || echo '?') compose," \
  "debootstrap $(dpkg-query -W -f '${Version}' debootstrap 2> /dev/null || echo '?')"
