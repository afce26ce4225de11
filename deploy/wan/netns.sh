#!/usr/bin/env bash
# A WAN in the kernel: two parties in their own network namespaces joined by a veth pair,
# egress shaped with tc (tbf), delay with netem where the kernel has it.
#
#   deploy/wan/netns.sh up [MBIT] [RTT_MS]   # namespaces vfl-a (coordinator + active), vfl-b
#   deploy/wan/netns.sh measure              # measured Mbit/s and RTT between them (JSON)
#   deploy/wan/netns.sh run JOB.yaml         # coordinator + parties in the namespaces
#   deploy/wan/netns.sh down
#
# Needs root and iproute2. Without sch_netem (this machine's kernel), the delay comes from
# the party daemons' in-process shaper (`vfl party serve --rtt-ms`), the bandwidth still
# from the kernel's token bucket.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
state=/tmp/vfl-netns
parties=(a b)
repo="$(dirname "$(dirname "$here")")"
py="${PYTHON:-$repo/.venv/bin/python}"  # the project's (scripts/install.sh)

ns_ip() { echo "10.77.0.$((10 + $1))"; }

up() {
    local mbit="${1:-20}" rtt="${2:-50}"
    mkdir -p "$state"
    echo "$mbit $rtt" > "$state/profile"
    ip netns add vfl-a
    ip netns add vfl-b
    ip link add eth0 netns vfl-a type veth peer name eth0 netns vfl-b
    local i=0
    for p in "${parties[@]}"; do
        ip -n "vfl-$p" addr add "$(ns_ip $i)/24" dev eth0
        ip -n "vfl-$p" link set eth0 up
        ip -n "vfl-$p" link set lo up
        # egress of each side: bandwidth in the kernel's token bucket
        ip netns exec "vfl-$p" tc qdisc add dev eth0 root handle 1: tbf rate "${mbit}mbit" \
            burst 64kb latency 400ms
        if ip netns exec "vfl-$p" tc qdisc add dev eth0 parent 1:1 handle 10: netem \
            delay "$((rtt / 2))ms" 2>/dev/null; then
            echo kernel > "$state/delay"
        else
            echo shaper > "$state/delay"
        fi
        i=$((i + 1))
    done
    echo "up: ${mbit} Mbit/s per direction (tbf); delay $((rtt / 2)) ms per direction" \
         "from: $(cat "$state/delay")"
}

down() {
    for p in "${parties[@]}"; do ip netns del "vfl-$p" 2>/dev/null || true; done
    rm -rf "$state"
}

measure() {
    ip netns exec vfl-b "$py" "$here/measure.py" serve "$(ns_ip 1)" 5201 &
    sleep 0.5
    ip netns exec vfl-a "$py" "$here/measure.py" probe "$(ns_ip 1)" 5201 --mb "${1:-10}"
    ip netns exec vfl-a "$py" "$here/measure.py" quit "$(ns_ip 1)" 5201
    wait
}

wait_file() {  # a daemon writes its port file once it serves (and, for parties, registered)
    for _ in $(seq 600); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "timed out waiting for $1" >&2; return 1
}

run() {
    local job="$1" work="$state/run"
    read -r mbit rtt < "$state/profile"
    local shape=()
    [ "$(cat "$state/delay")" = shaper ] && shape=(--bandwidth-mbps 100000 --rtt-ms "$rtt")
    mkdir -p "$work"
    "$py" "$here/render_run.py" "$job" "$work" "$(ns_ip 0)" "$(ns_ip 1)"
    rm -f "$work"/*.port
    ip netns exec vfl-a "$py" -m vfl.cli.main coordinator serve --db "$work/jobs.sqlite" \
        --listen "$(ns_ip 0):7700" --port-file "$work/coordinator.port" \
        >"$work/coordinator.log" 2>&1 &
    wait_file "$work/coordinator.port"
    ip netns exec vfl-a "$py" -m vfl.cli.main party serve --config "$work/active.yaml" \
        "${shape[@]}" --port-file "$work/active.port" >"$work/active.log" 2>&1 &
    ip netns exec vfl-b "$py" -m vfl.cli.main party serve --config "$work/passive.yaml" \
        "${shape[@]}" --port-file "$work/passive.port" >"$work/passive.log" 2>&1 &
    wait_file "$work/active.port"
    wait_file "$work/passive.port"
    local id
    id=$(ip netns exec vfl-a "$py" -m vfl.cli.main submit "$work/job.yaml" \
        --coordinator "$(ns_ip 0):7700")
    ip netns exec vfl-a "$py" -m vfl.cli.main watch "$id" --json \
        --coordinator "$(ns_ip 0):7700"
    kill %1 %2 %3 2>/dev/null || true
    wait 2>/dev/null || true
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down ;;
    measure) shift; measure "$@" ;;
    run) shift; run "$@" ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
esac
