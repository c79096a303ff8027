#!/usr/bin/env bash
# What the strictly read-only load costs ([cluster] clickhouse_object_access = read-only,
# docs/object-store.md): the blog's tenant (8 days of ROWS_PER_DAY rows) tiered (5 days) on node1
# and moved to node2, once with each mode, each in its own 2-node lab (local object store). One
# JSON line per mode: tiering's wall time and the time of its ATTACH and swap statements
# (load_sql_ms: ATTACH PARTITION in read-create, DETACH TABLE + place-parts + ATTACH TABLE in
# read-only), the move's wall time and its CLONE state; then the load average.
#   bash bench/readonly.sh [BUILD_DIR] [ROWS_PER_DAY]      (defaults: build-release, 250000)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
per=${2:-250000}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh
export FERRY_TEST_NOW=$(date -u -d 2026-11-09T00:00:00Z +%s) # days 01..05 due at 3d

ms() { echo $(( $(date +%s%N) / 1000000 )); }

for mode in read-create read-only; do
    L=$T/$mode
    mv_setup "$L" 2 >/dev/null
    sed -i "s/^clickhouse_version = /clickhouse_object_access = $mode\nclickhouse_version = /" "$L/mv.conf"
    U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
    mv_ingest "$U1" blog 0 8 "$per"
    before=$(mv_fp "$U1" blog 0)
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --dry-run >/dev/null
    t0=$(ms)
    "$FERRY_BIN" tier --config "$L/mv.conf" --older-than 3d --json >"$T/$mode.tier" 2>"$T/$mode.tier.err" ||
        { tail -5 "$T/$mode.tier.err" >&2; exit 1; }
    t1=$(ms)
    "$FERRY_BIN" move --config "$L/mv.conf" --tenant blog --split 0 --to node2 --grace 0 --json \
        >"$T/$mode.move" 2>"$T/$mode.move.err" || { tail -5 "$T/$mode.move.err" >&2; exit 1; }
    t2=$(ms)
    [ "$(mv_fp "$U2" blog 0)" = "$before" ] || { echo "$mode: rows differ after the move" >&2; exit 1; }
    M=$(jq -c 'select(.event == "move")' "$T/$mode.move")
    jq -nc --arg mode "$mode" --argjson rows "$((8 * per))" --argjson tier "$(cat "$T/$mode.tier")" \
        --argjson move "$M" --argjson tier_wall $((t1 - t0)) --argjson move_wall $((t2 - t1)) \
        '{mode: $mode, rows: $rows, partitions_tiered: $tier.partitions_tiered,
          tier_wall_ms: $tier_wall, tier_load_sql_ms: ($tier.load_sql_ms | floor),
          tier_attach_ms: ($tier.step_ms.ATTACH | floor), move_wall_ms: $move_wall,
          move_clone_ms: ($move.state_ms.CLONE // 0 | floor)}'
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
done
echo "{\"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
