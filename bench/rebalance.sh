#!/usr/bin/env bash
# A rebalance onto a new shard, with and without a bandwidth limit, side by side in one run: a
# 3-node lab with TENANTS tenants (one slice each, ROWS rows over 5 days: 3 days of hot rows and
# 2 cold days; the hot bytes must dwarf a move's fixed cost or the limit is never reached), a 4th
# node added, then `ferry rebalance` twice (back and forth by draining the new node is not the
# same plan, so two labs are built alike): once unlimited, once with --max-bytes-per-second
# LIMIT. One JSON line each: slices moved, wall seconds, bytes copied, achieved bytes/s and its
# ratio to the limit (the goal: within 10% over the run), the per-shard limit, the load average.
#   bash bench/rebalance.sh [BUILD_DIR] [TENANTS] [LIMIT] [ROWS]
#   (defaults: build-release, 12, 1M, 2000000: about 15 MB of hot parts per slice)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
tenants=${2:-12}
limit=${3:-1M}
rows=${4:-2000000}
per_day=$((rows / 5))
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

run() { # run NAME [rebalance options...]
    local name=$1; shift
    local L=$T/$name u
    mv_setup "$L" 3 >/dev/null
    "$FERRY_BIN" tenant add $(seq 1 "$tenants" | sed 's/^/t/') --config "$L/mv.conf" >/dev/null
    for i in $(seq 1 "$tenants"); do
        u=$("$FERRY_BIN" route --tenant "t$i" --json --config "$L/mv.conf" | jq -r '.slices[0].shards[0]')
        u=$(lab_url "$L" "$u")
        chq "$u" "INSERT INTO events SELECT 't$i', 20261101 + intDiv(number, $per_day), 0,
            cityHash64(number, $i), number FROM numbers($rows)
            SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
        for d in 1 2; do chq "$u" "ALTER TABLE events MOVE PARTITION ('t$i', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
    done
    "$FERRY_BIN" lab add-node --dir "$L" >/dev/null 2>&1
    mv_conf "$L"
    chq "$(lab_url "$L" node4)" "$MV_DDL" >/dev/null
    "$FERRY_BIN" init --config "$L/mv.conf" >/dev/null
    local t0 t1
    t0=$(date +%s%N)
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --json "$@" >"$T/$name.json" 2>"$T/$name.err" ||
        { tail -5 "$T/$name.err" >&2; exit 1; }
    t1=$(date +%s%N)
    local S moved copied
    S=$(jq -c 'select(.event == "summary")' "$T/$name.json")
    moved=$(jq -s '[.[] | select(.event == "move" and .state == "DONE")] | length' "$T/$name.json")
    copied=$(jq -s '[.[] | select(.event == "move") | .hot_copied_bytes + .cold_copied_bytes] | add // 0' "$T/$name.json")
    jq -cn --arg name "$name" --argjson moved "$moved" --argjson copied "$copied" \
        --argjson ms $(((t1 - t0) / 1000000)) --arg opts "$*" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
        --argjson s "$S" \
        '{bench: "rebalance", run: $name, options: $opts, slices_moved: $moved, wall_ms: $ms,
          bytes_copied: $copied, bytes_per_second: ($copied / ($ms / 1000) | floor),
          failed: $s.failed, loadavg: $load}'
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

lim=$(numfmt --from=iec "$limit")
a=$(run unlimited --max-parallel 4 --max-per-shard 2)
b=$(run limited --max-parallel 4 --max-per-shard 2 --max-bytes-per-second "$limit")
echo "$a"
echo "$b"
jq -cn --argjson b "$b" --argjson lim "$lim" \
    '{bench: "rebalance_limit", limit_bytes_per_second: $lim,
      achieved_ratio: ($b.bytes_per_second / $lim)}'
