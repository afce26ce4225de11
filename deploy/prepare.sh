#!/usr/bin/env bash
# The deploy demo's folders, as separate organisations keep them, outside the clone.
#
# Usage: deploy/prepare.sh [DIR]     DIR default: $VFL_DEPLOY, else ~/vfl-deploy
#   DIR/ca/                   the CA operator's folder: ca.key never leaves it
#   DIR/<id>/tls/             one organisation's folder per identity (plant, cooling, drive,
#                             coordinator, admin): <id>.key made there by `vfl certs request`,
#                             <id>.csr sent to the CA, <id>.crt and ca.crt handed back by
#                             `vfl certs sign`; the process's --tls DIR
#   DIR/<party>/state/        a party daemon's state (checkpoints, models)
#   DIR/coordinator/db/       the coordinator's job store
# Certificates that exist are kept (deploy/README.md makes them by hand first);
# missing ones are made by the same request/sign flow, each command printed. Without DIR
# (the compose demo) it writes deploy/.env: VFL_DEPLOY and the non-root uid/gid the
# containers run as (not secret; ignored by git). VFL overrides the vfl command.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
if [ -z "${VFL:-}" ]; then
  if [ -x "$repo/.venv/bin/vfl" ]; then
    VFL="$repo/.venv/bin/vfl"
  elif command -v vfl > /dev/null; then
    VFL=vfl
  else
    echo "error: no vfl command: run scripts/install.sh first (it makes .venv/bin/vfl)" >&2
    exit 2
  fi
fi
dir=$(realpath -m "${1:-${VFL_DEPLOY:-$HOME/vfl-deploy}}")
case "$dir/" in
  "$(realpath "$repo")"/*)
    echo "error: $dir is inside the clone; keep keys outside it (default ~/vfl-deploy)" >&2
    exit 2 ;;
esac
mkdir -p "$dir"
PARTIES="plant cooling drive"
# coordinator, the operator (vfl submit/jobs/... as "admin"), and every party of job.yaml
IDENTITIES="coordinator admin $PARTIES"
run() { echo "+ $*" | sed "s#$dir#\$VFL_DEPLOY#g; s#$VFL#vfl#"; "$@" > /dev/null; }

[ -f "$dir/ca/ca.crt" ] || run $VFL certs init "$dir/ca"
for id in $IDENTITIES; do
  tls="$dir/$id/tls"
  [ -f "$tls/$id.crt" ] && continue
  [ -f "$tls/$id.key" ] || run $VFL certs request --party "$id" --dir "$tls"
  run $VFL certs sign "$dir/ca" "$tls/$id.csr"
done
mkdir -p "$dir/coordinator/db"
for p in $PARTIES; do mkdir -p "$dir/$p/state"; done

# Containers run as a non-root uid that must read its key (mode 0600) and write the db
# and its party's state directory.
if [ "$(id -u)" = 0 ]; then
  uid=10001 gid=10001
  for id in $IDENTITIES; do chown -R "$uid:$gid" "$dir/$id"; done
else
  uid=$(id -u) gid=$(id -g)
fi
if [ $# -eq 0 ]; then
  printf 'VFL_DEPLOY=%s\nVFL_UID=%s\nVFL_GID=%s\n' "$dir" "$uid" "$gid" > "$here/.env"
fi
echo "ready: CA in $dir/ca; $IDENTITIES each in $dir/<id>/tls (containers run as $uid:$gid)"
