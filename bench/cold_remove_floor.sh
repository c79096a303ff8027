#!/usr/bin/env bash
# What ClickHouse charges to empty partitions of 40 cold parts (the 100x tenant of bench/move.sh,
# 125 M rows over 5 days on the object-storage disk), two ways, on one server: DETACH PARTITION
# (what a move's CLEANUP runs on the source: every file cloned into detached/, then the part
# removed) and REPLACE PARTITION ... FROM an empty twin table (the parts marked outdated, removed
# later by the server's cleanup thread). Each trial clones the 5 partitions into two fresh tables
# (ATTACH PARTITION ... FROM events: hard links) and times one ALTER over all 5 on each. Twice:
# on parts ClickHouse moved to the cold disk itself ("native", ref_count 0) and on the same parts
# after a ferry move to node2 ("ferry_owned": pointer files the agent wrote, ref_count 1).
# A third way for parts whose objects ClickHouse would delete (ref_count 0): FREEZE PARTITION
# (every file hard-linked under shadow/, its ref_count raised), then the same REPLACE, then the
# freeze's folders unlinked as ferry's agent removes a freeze (no ClickHouse involved): timed as
# freeze_ms + replace_ms and unlink_ms.
# Prints one JSON line per layout. TRIALS (default 3) trials per layout.
#   bash bench/cold_remove_floor.sh [BUILD_DIR]      (default: build-release)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

ms() { echo $(( $(date +%s%N) / 1000000 )); }
L=$T/floor
mv_setup "$L" 2 >/dev/null
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
cold_per=25000000
for d in 0 1 2 3 4; do
    chq "$U1" "INSERT INTO events SELECT 'acme', 20261101 + intDiv(number, $cold_per), 0,
        cityHash64(number, 0) % 100000, cityHash64(number, 0, 1) % 1000000
        FROM numbers($((d * cold_per)), $cold_per)" --max-time 3600 >/dev/null
done
for d in 1 2 3 4 5; do
    chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" --max-time 3600 >/dev/null
done

trials() { # URL LAYOUT: one JSON line
    local u=$1 layout=$2 node=$3 pids p k tb t0 det=() rep=() frz=() frep=() unl=() parts
    pids=$(chq "$u" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' ORDER BY 1")
    parts=$(chq "$u" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")
    local att="" dsql="" rsql=""
    for p in $pids; do
        att+="${att:+, }ATTACH PARTITION ID '$p' FROM events"
        dsql+="${dsql:+, }DETACH PARTITION ID '$p'"
        rsql+="${rsql:+, }REPLACE PARTITION ID '$p' FROM cr_empty"
    done
    for k in $(seq 1 "${TRIALS:-3}"); do
        for tb in cr_detach cr_replace cr_freeze cr_empty; do
            chq "$u" "DROP TABLE IF EXISTS $tb SYNC" >/dev/null
            chq "$u" "CREATE TABLE $tb AS events" >/dev/null
            chq "$u" "SYSTEM STOP MERGES $tb" >/dev/null
        done
        chq "$u" "ALTER TABLE cr_detach $att" >/dev/null
        chq "$u" "ALTER TABLE cr_replace $att" >/dev/null
        chq "$u" "ALTER TABLE cr_freeze $att" >/dev/null
        t0=$(ms); chq "$u" "ALTER TABLE cr_detach $dsql" >/dev/null; det+=($(( $(ms) - t0 )))
        t0=$(ms)
        chq "$u" "ALTER TABLE cr_replace $rsql SETTINGS allow_replace_partition_from_empty_source = 1" >/dev/null
        rep+=($(( $(ms) - t0 )))
        t0=$(ms)
        chq "$u" "ALTER TABLE cr_freeze FREEZE WITH NAME 'cr$k'" >/dev/null
        frz+=($(( $(ms) - t0 )))
        t0=$(ms)
        chq "$u" "ALTER TABLE cr_freeze ${rsql} SETTINGS allow_replace_partition_from_empty_source = 1" >/dev/null
        frep+=($(( $(ms) - t0 )))
        t0=$(ms)
        rm -rf "$L/$node/data/shadow/cr$k" "$L/$node/data/disks/cold/shadow/cr$k"
        unl+=($(( $(ms) - t0 )))
        [ "$(chq "$u" "SELECT count() FROM system.parts WHERE active AND table IN ('cr_detach', 'cr_replace', 'cr_freeze')")" = 0 ] ||
            fail "$layout: a table kept active parts"
    done
    for tb in cr_detach cr_replace cr_freeze cr_empty; do chq "$u" "DROP TABLE IF EXISTS $tb SYNC" >/dev/null; done
    jq -cn --arg layout "$layout" --argjson parts "$parts" \
        --argjson det "[$(IFS=,; echo "${det[*]}")]" --argjson rep "[$(IFS=,; echo "${rep[*]}")]" \
        --argjson frz "[$(IFS=,; echo "${frz[*]}")]" --argjson frep "[$(IFS=,; echo "${frep[*]}")]" \
        --argjson unl "[$(IFS=,; echo "${unl[*]}")]" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
        '{bench: "cold_remove_floor", layout: $layout, cold_parts: $parts, detach_ms: $det,
          replace_from_empty_ms: $rep, freeze_ms: $frz, freeze_then_replace_ms: $frep,
          unlink_freeze_ms: $unl, loadavg: $load}'
}
trials "$U1" native node1
"$FERRY_BIN" move --config "$L/mv.conf" --tenant acme --split 0 --to node2 --grace 0 --json \
    >"$T/move.json" 2>"$T/move.err" || { cat "$T/move.err" >&2; exit 1; }
trials "$U2" ferry_owned node2
"$FERRY_BIN" lab down --dir "$L" >/dev/null
