#!/usr/bin/env bash
# Read throughput of one tenant with rf 1 vs rf 2, each query sent to ONE replica chosen by
# lib/route's selector directly (bench_replica_read), NOT through ferry's router (whose SELECT
# path is built separately). A 2-node lab: the tenant (2M rows, 8 days) on node1; then `ferry
# tenant set-rf acme 2` + `ferry rebalance` clones it to node2 and the same load runs over both.
# Both lab nodes run on this machine's cores, so on a small machine the second replica adds
# little CPU: read the ratio with that in mind. Prints three JSON lines (rf1, rf2, summary).
#   bash bench/replicas_read.sh [BUILD_DIR] [SECONDS] [THREADS]   (defaults: build-release, 10, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
secs=${2:-10}
threads=${3:-4}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

L=$T/lab
mv_setup "$L" 2 >/dev/null
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 8 250000
"$FERRY_BIN" rebalance --config "$L/mv.conf" --dry-run >/dev/null
Q="SELECT day, count(), sum(v), uniq(user) FROM events WHERE tenant = 'acme' AND split = 0 GROUP BY day ORDER BY day"
urls() { "$FERRY_BIN" route --config "$L/mv.conf" --tenant acme --json | jq -r '.slices[0].shards[]' |
    while read -r n; do lab_url "$L" "$n"; done | paste -sd, ; }
a=$("$bdir/bench/bench_replica_read" --urls "$(urls)" --query "$Q" --seconds "$secs" --threads "$threads")
"$FERRY_BIN" tenant set-rf acme 2 --config "$L/mv.conf" >/dev/null
"$FERRY_BIN" rebalance --config "$L/mv.conf" --grace 300 >/dev/null
[ "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" = 2000000 ] || { echo "clone incomplete" >&2; exit 1; }
b=$("$bdir/bench/bench_replica_read" --urls "$(urls)" --query "$Q" --seconds "$secs" --threads "$threads")
echo "$a" | jq -c '. + {rf: 1}'
echo "$b" | jq -c '. + {rf: 2}'
jq -c -n --argjson a "$a" --argjson b "$b" --argjson cores "$(nproc)" \
    '{summary: true, mode: "selector-direct (not through the router)", cores: $cores,
      qps_rf1: $a.qps, qps_rf2: $b.qps, ratio: ($b.qps / $a.qps)}'
