#!/usr/bin/env bash
# The storage cost of a cold replica: a tenant with 5 cold days (on the object disk) and 3 hot
# ones on node1 of a 2-node lab gets a second replica (`ferry tenant set-rf acme 2` + `ferry
# rebalance`, a clone move). For the blog's tenant size and one SCALE times larger (cold rows),
# prints one JSON line each: the cold data's bytes, the pointer bytes copied for it, the bytes the
# new replica's cold disk folder grew by (its local metadata), the bytes object storage grew by
# (0 expected: the replicas share the objects), and the extra bytes as a fraction of the cold
# data; then a summary line. Bytes only, so the sanitizer build is fine.
#   bash bench/replicas.sh [BUILD_DIR] [SCALE]      (defaults: build, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build}" && pwd)
scale=${2:-10}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

bytes_of() { du -sb "$1" 2>/dev/null | cut -f1; }

run_size() { # run_size NAME COLD_ROWS_PER_DAY
    local name=$1 cold_per=$2 hot_per=250000
    local L=$T/$name
    mv_setup "$L" 2 >/dev/null
    local U1 d
    U1=$(lab_url "$L" node1)
    mv_ingest "$U1" acme 0 5 "$cold_per"
    chq "$U1" "INSERT INTO events SELECT 'acme', 20261106 + intDiv(number, $hot_per), 0,
        cityHash64(number, 7) % 100000, number FROM numbers($((3 * hot_per)))
        SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
    for d in 1 2 3 4 5; do
        chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null
    done
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --dry-run >/dev/null
    local cold_dir=$L/node2/data/disks/cold blobs0 local0
    blobs0=$(bytes_of "$L/blobs"); local0=$(bytes_of "$cold_dir")
    "$FERRY_BIN" tenant set-rf acme 2 --config "$L/mv.conf" >/dev/null
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --grace 300 --json >"$T/$name.json"
    local r
    r=$(jq -c 'select(.event == "move")' "$T/$name.json")
    [ "$(jq -r .state <<<"$r")" = DONE ] || { echo "clone failed: $r" >&2; exit 1; }
    local blobs1 local1
    blobs1=$(bytes_of "$L/blobs"); local1=$(bytes_of "$cold_dir")
    jq -c -n --arg name "$name" --argjson r "$r" --argjson rows "$((5 * cold_per))" \
        --argjson local_grew "$((local1 - local0))" --argjson blobs_grew "$((blobs1 - blobs0))" \
        '{name: $name, cold_rows: $rows, cold_parts: $r.cold_parts, cold_bytes: $r.cold_bytes,
          cold_pointer_bytes_copied: $r.cold_copied_bytes, new_replica_cold_disk_grew: $local_grew,
          object_store_grew: $blobs_grew,
          extra_fraction: ($local_grew / $r.cold_bytes), copied_fraction: ($r.cold_copied_bytes / $r.cold_bytes),
          hot_bytes: $r.hot_bytes, hot_copied_bytes: $r.hot_copied_bytes, seconds: $r.seconds}'
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

a=$(run_size blog 250000)
b=$(run_size "x$scale" $((250000 * scale)))
echo "$a"
echo "$b"
jq -c -n --argjson a "$a" --argjson b "$b" --argjson scale "$scale" \
    '{summary: true, scale: $scale, cold_bytes_ratio: ($b.cold_bytes / $a.cold_bytes),
      pointer_bytes_ratio: ($b.cold_pointer_bytes_copied / $a.cold_pointer_bytes_copied),
      extra_fraction_blog: $a.extra_fraction, extra_fraction_large: $b.extra_fraction}'
