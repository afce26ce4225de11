#!/usr/bin/env bash
# The compose topology as local processes: the same party configs (deploy/parties), the
# same job (deploy/job.yaml), the same certificate bundles and health checks; only the
# addresses differ (loopback, OS-chosen ports). Runs the job and checks its result.
#
# Usage: deploy/run_local.sh [WORKDIR]   (default: a fresh temporary folder)
#   VFL overrides the command (e.g. "python -m coordinator.cli.main").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mkdir -p "${1:-$(mktemp -d)}" && cd "${1:-.}" && pwd)
VFL=${VFL:-vfl}
PARTIES="plant cooling drive"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
}
trap cleanup EXIT

wait_port() {  # wait_port NAME: the port a daemon wrote once serving
  for _ in $(seq 600); do
    if [ -s "$work/$1.port" ]; then cat "$work/$1.port"; return; fi
    sleep 0.1
  done
  echo "error: $1 did not start; see $work/$1.log" >&2
  tail -5 "$work/$1.log" >&2
  exit 3
}

"$here/prepare.sh" "$work" > /dev/null
rm -f "$work"/*.port
$VFL coordinator serve --db "$work/db/jobs.sqlite" --listen 127.0.0.1:0 \
  --tls "$work/certs/coordinator" --port-file "$work/coordinator.port" --parent-pid $$ \
  2> "$work/coordinator.log" &
pids+=($!)
coordinator="127.0.0.1:$(wait_port coordinator)"
for p in $PARTIES; do
  $VFL party serve --config "$here/parties/$p.yaml" --tls "$work/certs/$p" \
    --state-dir "$work/state/$p" \
    --coordinator "$coordinator" --port-file "$work/$p.port" --parent-pid $$ \
    2> "$work/$p.log" &
  pids+=($!)
done
$VFL health "$coordinator" --tls "$work/certs/coordinator" --identity coordinator > /dev/null
for p in $PARTIES; do
  $VFL health "127.0.0.1:$(wait_port "$p")" --tls "$work/certs/$p" --identity "$p" > /dev/null
done

$VFL submit "$here/job.yaml" --wait --json --coordinator "$coordinator" \
  --tls "$work/certs/admin" --identity admin > "$work/result.json"
python3 "$here/check_result.py" "$work/result.json"
cat "$work/result.json"
