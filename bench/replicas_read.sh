#!/usr/bin/env bash
# Read throughput of one read-heavy tenant through `ferry router` with rf 1 vs rf 2, and the
# storage cost of the second replica's cold side (docs/benchmarks.md, "Replicas: read throughput").
#
# A 2-node lab; tenant acme (2M rows, 8 days, 5 of them moved to the cold disk) on one node. The
# same aggregation is sent from THREADS client threads for SECONDS s (bench_replica_read, one
# keep-alive connection per thread) through the router: with rf 1 (every query to the one
# replica), and after `ferry tenant set-rf acme 2` + `ferry rebalance` (a clone move) with rf 2
# (the router picks one replica per query, load_balancing = random). Each load runs twice: as
# is, and with max_threads = 1 (one core per query). The per-shard query counts come from the
# router's GET /ferry/router. Both lab nodes and the router share this machine's cores, so the
# ratio is bounded by cores / (cores per query), not by the number of replicas.
# Prints one JSON line per measurement and a summary line.
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
C=$L/mv.conf
printf '\n[router]\nauth = none\n' >>"$C" # a benchmark of routing on loopback, no users
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null
SRC=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards[0]')
US=$(lab_url "$L" "$SRC")
mv_ingest "$US" acme 0 8 250000
for d in 1 2 3 4 5; do chq "$US" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done

bg_start "$T/router.log" "$FERRY_BIN" router --config "$C" --listen 127.0.0.1:0 --port-file "$T/router.port"
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 10 curl -sf "$R/ping"

Q="SELECT day, count(), sum(v), uniq(user) FROM events WHERE tenant = 'acme' GROUP BY day ORDER BY day"
Q1="$Q SETTINGS max_threads = 1"
expect=$(chq "$US" "$Q")
[ "$(chq "$R" "$Q")" = "$expect" ] || { echo "the router's answer differs" >&2; exit 1; }

# measure LABEL URL SQL: one JSON line, with the per-shard queries the router sent meanwhile
measure() {
    local label=$1 url=$2 sql=$3 before after out
    before=$(curl -sf "$R/ferry/router")
    out=$("$bdir/bench/bench_replica_read" --url "$url" --query "$sql" --seconds "$secs" --threads "$threads" --label "$label")
    after=$(curl -sf "$R/ferry/router")
    jq -c -n --argjson o "$out" --argjson a "$before" --argjson b "$after" \
        '$o + {per_shard: ($b.reads.shards | to_entries | map({key, value: (.value.queries - $a.reads.shards[.key].queries)}) | from_entries)}'
}
r1=$(measure rf1_router "$R" "$Q")
r1t=$(measure rf1_router_max_threads_1 "$R" "$Q1")
d1=$(measure rf1_direct "$US" "$Q")

"$FERRY_BIN" tenant set-rf acme 2 --config "$C" >/dev/null
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb.json"
MV=$(jq -c 'select(.event == "move")' "$T/rb.json")
[ "$(jq -r .state <<<"$MV")" = DONE ] || { echo "clone not done: $MV" >&2; exit 1; }
ver=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq .version)
wait_for 30 bash -c "[ \$(curl -sf '$R/ferry/router' | jq .routing_version) -ge $ver ]"
[ "$(chq "$R" "$Q")" = "$expect" ] || { echo "the router's answer differs with rf 2" >&2; exit 1; }
r2=$(measure rf2_router "$R" "$Q")
r2t=$(measure rf2_router_max_threads_1 "$R" "$Q1")
for x in "$r1" "$r1t" "$d1" "$r2" "$r2t"; do echo "$x"; done
# Interleaved, same data and same minutes: a second router with load_balancing = in_order sends
# every query to the route's first replica (one replica doing the work, as with rf 1); runs
# alternate with the random router, which shares the load over both. On a shared machine this
# comparison is less exposed to load drifting between the rf 1 and rf 2 phases above.
sed 's/^\[router\]$/[router]\nload_balancing = in_order/' "$C" >"$L/inorder.conf"
grep -q '^load_balancing = in_order' "$L/inorder.conf" || printf '[router]\nload_balancing = in_order\n' >>"$L/inorder.conf"
bg_start "$T/router2.log" "$FERRY_BIN" router --config "$L/inorder.conf" --listen 127.0.0.1:0 --port-file "$T/router2.port"
wait_for 20 test -s "$T/router2.port"
R2=http://127.0.0.1:$(cat "$T/router2.port")
wait_for 10 curl -sf "$R2/ping"
one=0 two=0
for round in 1 2 3; do
    a=$("$bdir/bench/bench_replica_read" --url "$R2" --query "$Q" --seconds "$secs" --threads "$threads" --label "in_order_round$round")
    b=$("$bdir/bench/bench_replica_read" --url "$R" --query "$Q" --seconds "$secs" --threads "$threads" --label "random_round$round")
    echo "$a"; echo "$b"
    one=$(jq -n --argjson x "$one" --argjson a "$a" '$x + $a.queries / $a.seconds')
    two=$(jq -n --argjson x "$two" --argjson b "$b" '$x + $b.queries / $b.seconds')
done
jq -c -n --argjson r1 "$r1" --argjson r1t "$r1t" --argjson d1 "$d1" --argjson r2 "$r2" \
    --argjson r2t "$r2t" --argjson mv "$MV" --argjson one "$one" --argjson two "$two" --argjson cores "$(nproc)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    '{summary: true, cores: $cores, loadavg: $load, threads: $r1.threads, seconds: $r1.seconds,
      qps_rf1: $r1.qps, qps_rf2: $r2.qps, ratio: ($r2.qps / $r1.qps),
      qps_rf1_max_threads_1: $r1t.qps, qps_rf2_max_threads_1: $r2t.qps,
      ratio_max_threads_1: ($r2t.qps / $r1t.qps), qps_rf1_direct: $d1.qps,
      cold_bytes: $mv.cold_bytes, cold_pointer_bytes_copied: $mv.cold_copied_bytes,
      cold_extra_fraction: ($mv.cold_copied_bytes / $mv.cold_bytes),
      hot_bytes: $mv.hot_bytes, hot_bytes_copied: $mv.hot_copied_bytes,
      interleaved_qps_one_replica: ($one / 3), interleaved_qps_two_replicas: ($two / 3),
      interleaved_ratio: ($two / $one)}'
