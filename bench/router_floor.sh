#!/usr/bin/env bash
# Where a normal client's latency goes while other clients load the router with valid small
# statements (router_abuse.sh's `tiny` load), and the floor the node and the machine set:
# one JSON line per run from bench/router_floor.py (docs/benchmarks.md, "where the normal
# client's p99 goes"): 200 fresh-connection `SELECT 1` through the router and straight to the
# node, alone and while 8 keep-alive connections send `SELECT 1` as fast as they are answered
# (in the same process as the normal client, and in another), and the router's and the node's
# CPU time per statement from /proc.
#   bash bench/router_floor.sh [BUILD_DIR] [RUNS] [N]     (defaults: build, 3, 200)
# The sanitizer build (build) is what tests/integration/router_abuse.sh measures.
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build}" && pwd)
runs=${2:-3}
n=${3:-200}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/events.sh
source tests/lib/router.sh
LAB=$T/lab
events_lab "$LAB" "max_request_bytes = 4M" "max_buffered_bytes = 1M" \
    "memory_budget = 8M" "max_connections = 600" "max_connections_per_address = 50" \
    "header_timeout = 3s" "receive_timeout = 8s" "idle_timeout = 30s"
CONF=$EV_CONF
N1=$EV_NODE
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
start_router "$CONF" router
NPID=$(lab_pid "$LAB" node1)
for _ in $(seq 1 "$runs"); do
    python3 bench/router_floor.py "$R_URL" "$N1" "$R_PID" "$NPID" "$n"
done
stop_router "$R_PID"
