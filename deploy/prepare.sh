#!/usr/bin/env bash
# Certificates and folders for the deploy topology (docker compose or local processes).
#
# Usage: deploy/prepare.sh [RUN_DIR]       (compose.yml uses the default, deploy/run)
#   RUN_DIR/ca/           the federation CA; ca.key stays with the CA operator
#   RUN_DIR/certs/<id>/   one bundle per process (ca.crt, <id>.crt, <id>.key): its --tls DIR
#   RUN_DIR/db/           the coordinator's job store
#   deploy/.env           VFL_UID/VFL_GID: the non-root user the containers run as
# Existing files are kept; delete RUN_DIR to start over. VFL overrides the command.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run=$(mkdir -p "${1:-$here/run}" && cd "${1:-$here/run}" && pwd)
VFL=${VFL:-vfl}
# coordinator, the operator (vfl submit/jobs/... as "admin"), and every party of job.yaml
IDENTITIES="coordinator admin plant cooling drive"

mkdir -p "$run/db" "$run/certs" "$run/state/plant" "$run/state/cooling" "$run/state/drive"
[ -f "$run/ca/ca.crt" ] || $VFL certs init "$run/ca" > /dev/null
for id in $IDENTITIES; do
  [ -f "$run/certs/$id/$id.crt" ] ||
    $VFL certs issue "$run/ca" --party "$id" --bundle "$run/certs/$id" > /dev/null
done

# Containers run as a non-root uid that must read its key (mode 0600) and write the db
# and its party's state directory (checkpoints).
if [ "$(id -u)" = 0 ]; then
  uid=10001 gid=10001
  chown -R "$uid:$gid" "$run/certs" "$run/db" "$run/state"
else
  uid=$(id -u) gid=$(id -g)
fi
if [ "$run" = "$here/run" ]; then
  printf 'VFL_UID=%s\nVFL_GID=%s\n' "$uid" "$gid" > "$here/.env"
fi
echo "certificates for $IDENTITIES in $run/certs (CA in $run/ca)"
