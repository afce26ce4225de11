#!/usr/bin/env bash
# The compose topology as local processes: the same party configs (deploy/parties), the
# same job (deploy/job.yaml), certificates made the same way (deploy/prepare.sh), the same
# health checks; only the addresses differ (loopback, OS-chosen ports). Runs the job and
# checks its result.
#
# Usage: deploy/run_local.sh [WORKDIR]
#   WORKDIR is kept (CA, keys, logs, result); without it, a temporary folder outside the
#   clone is used and removed at the end (its logs are printed first if something failed).
#   VFL overrides the command (e.g. "python -m vfl.cli.main").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
if [ -z "${VFL:-}" ]; then
  if [ -x "$repo/.venv/bin/vfl" ]; then VFL="$repo/.venv/bin/vfl"; else VFL=vfl; fi
fi
export VFL
if [ $# -gt 0 ]; then
  work=$(mkdir -p "$1" && cd "$1" && pwd)
  temporary=""
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/vfl-run-local.XXXXXX")
  temporary=$work
fi
PARTIES="plant cooling drive"
pids=()
cleanup() {
  status=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  if [ -n "$temporary" ]; then
    if [ "$status" != 0 ]; then
      for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -5 "$log" >&2; }; done
    fi
    rm -rf "$temporary"
  fi
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
$VFL coordinator serve --db "$work/coordinator/db/jobs.sqlite" --listen 127.0.0.1:0 \
  --tls "$work/coordinator/tls" --port-file "$work/coordinator.port" --parent-pid $$ \
  2> "$work/coordinator.log" &
pids+=($!)
coordinator="127.0.0.1:$(wait_port coordinator)"
for p in $PARTIES; do
  $VFL party serve --config "$here/parties/$p.yaml" --tls "$work/$p/tls" \
    --state-dir "$work/$p/state" \
    --coordinator "$coordinator" --port-file "$work/$p.port" --parent-pid $$ \
    2> "$work/$p.log" &
  pids+=($!)
done
$VFL health "$coordinator" --tls "$work/coordinator/tls" --identity coordinator > /dev/null
for p in $PARTIES; do
  $VFL health "127.0.0.1:$(wait_port "$p")" --tls "$work/$p/tls" --identity "$p" > /dev/null
done

$VFL submit "$here/job.yaml" --wait --json --coordinator "$coordinator" \
  --tls "$work/admin/tls" --identity admin > "$work/result.json"
python3 "$here/check_result.py" "$work/result.json"
cat "$work/result.json"
