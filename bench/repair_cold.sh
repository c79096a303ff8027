#!/usr/bin/env bash
# A repair of cold partitions: rf 2 on a 2-node lab, node1 holding 5 days of 8 parts each (40
# parts, merges stopped) that ClickHouse moved to the object-storage disk, node2 holding
# nothing; `ferry repair` makes node2 equal. Timed with each build given, alternating, ROUNDS
# times (default 3), on a fresh lab each time: a build from before session 35 freezes every
# partition on node1 and sends the frozen pointer parts; a later one sends them live from the
# table's folder (lib/flow/replica_sync.c, cold_snapshot). One JSON line per run: the build, the
# repair's wall time, the freezes node1's agent made, the parts sent (live), the load average.
#   bash bench/repair_cold.sh BUILD_DIR [BUILD_DIR...]      (e.g. build-release /tmp/old/build-release)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: bash bench/repair_cold.sh BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
dirs=()
for b in "$@"; do dirs+=("$(cd "$b" && pwd)"); done
export FERRY_BIN=${dirs[0]}/ferry FERRY_BUILD_DIR=${dirs[0]} FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

ms() { echo $(( $(date +%s%N) / 1000000 )); }

one_run() { # one_run BUILD_DIR K
    local bdir=$1 k=$2 L d i t0 t1 want
    export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir
    L=$T/lab$k
    mv_rf2_setup "$L" --stop-merges >/dev/null
    local C=$L/rf2.conf
    "$FERRY_BIN" tenant add acme --config "$C" >/dev/null
    for d in 1 2 3 4 5; do
        for i in 1 2 3 4 5 6 7 8; do
            chq "$U1" "INSERT INTO events SELECT 'acme', 2026110$d, 0, number % 1000, number + $i * 1000000
                FROM numbers(20000)" >/dev/null
        done
        chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null
    done
    want=$(mv_fp "$U1" acme 0)
    sync
    t0=$(ms)
    "$FERRY_BIN" repair --config "$C" --tenant acme --grace 100 --json >"$T/rep$k.json" 2>"$T/rep$k.err" ||
        { tail -5 "$T/rep$k.err" >&2; exit 1; }
    t1=$(ms)
    [ "$(mv_fp "$U2" acme 0)" = "$want" ] || { echo "run $k: node2 not equal to node1" >&2; exit 1; }
    local parts sent live freezes
    parts=$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events'")
    sent=$(grep -o 'parts_sent=[0-9]*' "$T/rep$k.err" | awk -F= '{s += $2} END {print s + 0}')
    live=$({ grep -o 'sent_live=[0-9]*' "$T/rep$k.err" || true; } | awk -F= '{s += $2} END {print s + 0}')
    freezes=$(grep -c 'op=freeze status=200' "$L/node1/node.log" || true)
    jq -cn --arg build "$bdir" --argjson ms $((t1 - t0)) --argjson parts "$parts" \
        --argjson sent "$sent" --argjson live "$live" --argjson freezes "$freezes" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
        '{bench: "repair_cold", build: $build, repair_ms: $ms, node2_parts: $parts,
          parts_sent: $sent, parts_sent_live: $live, node1_freezes: $freezes, loadavg: $load}'
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

k=0
for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    for b in "${dirs[@]}"; do
        k=$((k + 1))
        one_run "$b" "$k"
    done
done
