#!/usr/bin/env bash
# What ClickHouse itself charges for tiering's swap (docs/tiering.md, "The swap, and late rows"),
# without ferry: on one lab node, a table of 5 partitions of PARTS unmerged parts each (merges
# stopped, like the blog's unmerged days) and a staging table of 1 part per partition; then each
# form of the swap, partition by partition, one ALTER each:
#   replace           REPLACE PARTITION ID p FROM staging (the old swap; drops a late part)
#   detach_part       DETACH PART of each part, then ATTACH PARTITION ID p FROM staging (today's)
#   drop_part         DROP PART of each part, then ATTACH PARTITION ID p FROM staging
#   detach_partition  DETACH PARTITION ID p, then ATTACH PARTITION ID p FROM staging
# The forms run interleaved, ROUNDS times each on fresh tables; per form the server's own time
# (the sum of the ALTERs' elapsed_ns from X-ClickHouse-Summary) and curl's time from request
# to answer (the sum over the ALTERs), as
# each round's value and the median. One JSON line per form, then the load average.
#   bash bench/tier_swap_floor.sh [BUILD_DIR] [ROUNDS] [PARTS]   (build-release, 7, 4)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
rounds=${2:-7}
parts=${3:-4}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh

lab_up "$T/lab" --nodes 1
U=$(lab_url "$T/lab" node1)
mk() {
    chq "$U" "CREATE TABLE $1 (p UInt32, ts DateTime, v UInt64) ENGINE = MergeTree
        PARTITION BY p ORDER BY ts SETTINGS storage_policy = 'tiered'" >/dev/null
}
# alter SQL: runs it; adds the server's elapsed time (X-ClickHouse-Summary) to $us and curl's
# time from request to answer to $wus, in microseconds
alter() {
    local out code total
    out=$(curl -sS -D "$T/alter.hdr" -o "$T/alter.out" -w '%{http_code} %{time_total}' "$U/" \
        --data-binary "$1") || fail "curl failed for: $1"
    code=${out% *} total=${out#* }
    [ "$code" = 200 ] || fail "'$1' gave HTTP $code: $(cat "$T/alter.out")"
    us=$((us + $(tr -d '\r' <"$T/alter.hdr" | sed -n 's/^X-ClickHouse-Summary: //p' |
        jq -r '(.elapsed_ns | tonumber) / 1000 | floor')))
    wus=$((wus + $(awk -v t="$total" 'BEGIN {printf "%d", t * 1000000}')))
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

FORMS="replace detach_part drop_part detach_partition"
declare -A SERVER WALL
load0=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$rounds"); do
    for form in $FORMS; do
        chq "$U" "DROP TABLE IF EXISTS t SYNC" >/dev/null
        chq "$U" "DROP TABLE IF EXISTS s SYNC" >/dev/null
        mk t
        mk s
        chq "$U" "SYSTEM STOP MERGES t" >/dev/null
        chq "$U" "SYSTEM STOP MERGES s" >/dev/null
        for k in $(seq "$parts"); do
            chq "$U" "INSERT INTO t SELECT number % 5, now() - number, number FROM numbers(200000)" >/dev/null
        done
        chq "$U" "INSERT INTO s SELECT number % 5, now() - number, number FROM numbers(200000)" >/dev/null
        # tiering swaps parts it froze (their files hardlinked in shadow/ until CLEANUP)
        [ "${FREEZE:-1}" = 0 ] || chq "$U" "ALTER TABLE t FREEZE WITH NAME 'swapfloor$r$form'" >/dev/null
        declare -A CMD=()
        for p in 0 1 2 3 4; do
            names=$(chq "$U" "SELECT name FROM system.parts WHERE database = currentDatabase()
                AND table = 't' AND active AND partition_id = '$p' ORDER BY name")
            c=""
            case $form in
            replace) c="REPLACE PARTITION ID '$p' FROM s" ;;
            detach_part | drop_part)
                verb=DETACH; [ "$form" = drop_part ] && verb=DROP
                for x in $names; do c="$c $verb PART '$x',"; done
                c="$c ATTACH PARTITION ID '$p' FROM s" ;;
            detach_partition) c="DETACH PARTITION ID '$p', ATTACH PARTITION ID '$p' FROM s" ;;
            esac
            CMD[$p]=$c
        done
        us=0 wus=0
        for p in 0 1 2 3 4; do alter "ALTER TABLE t ${CMD[$p]}"; done
        rows=$(chq "$U" "SELECT count() FROM t")
        [ "$rows" = 200000 ] || fail "$form: t holds $rows rows after the swap, not 200000"
        SERVER[$form]="${SERVER[$form]:-} $((us / 1000))"
        WALL[$form]="${WALL[$form]:-} $((wus / 1000))"
    done
done
for form in $FORMS; do
    jq -nc --arg form "$form" --argjson parts "$parts" --arg s "${SERVER[$form]}" \
        --arg w "${WALL[$form]}" --arg sm "$(echo "${SERVER[$form]}" | median)" \
        --arg wm "$(echo "${WALL[$form]}" | median)" \
        '{bench: "tier_swap_floor", form: $form, partitions: 5, parts_per_partition: $parts,
          server_ms: ($s | split(" ") | map(select(. != "") | tonumber)),
          server_ms_median: ($sm | tonumber),
          wall_ms: ($w | split(" ") | map(select(. != "") | tonumber)),
          wall_ms_median: ($wm | tonumber)}'
done
echo "load average: $load0 at the start, $(cut -d' ' -f1 /proc/loadavg) at the end"
