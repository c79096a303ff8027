#!/usr/bin/env bash
# Moving one tenant with ferry vs re-inserting it with INSERT ... SELECT (how operators move a
# tenant by hand today), side by side in one run: the blog's tenant (8 days, 5 of them cold, on
# the object disk) and one with SCALE times more cold rows. For each it prints one JSON line:
# ferry's wall time and bytes copied (cold pointer files, hot part files) and the re-insert's wall
# time and bytes read (and where ferry's time went: milliseconds per state, statements, agent
# requests, catalog writes), a third tenant with only the 5 cold days, the load average, what
# creating files costs in the labs' folder (bench/file_create_floor.sh; TMPDIR chooses where the
# labs run), then one summary line with the ratios. MOVE_ROUNDS=N moves each tenant back and
# forth N times in all, each move followed by the by-hand copy, and adds both medians and each
# move's state_ms; MOVE_SIZES (e.g. "blog") runs only the sizes named (blog, x<SCALE>,
# cold_only). MOVE_FLOOR=N adds to each tenant's line the floor of owning its cold parts, N
# trials (floor_probe below), and to the summary the ratios those floors set: the blog's median
# move plus what the bigger tenant's cold parts cost more at the least, over the blog's median
# move (the least ferry's 100x / 1x could be on this machine).
#   bash bench/move.sh [BUILD_DIR] [SCALE]      (defaults: build-release, 100)
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=$(cd "${1:-build-release}" && pwd)
scale=${2:-100}
export FERRY_BIN=$bdir/ferry FERRY_BUILD_DIR=$bdir FERRY_SOURCE_DIR=$PWD
source tests/lib/harness.sh
source tests/lib/lab.sh
source tests/lib/move.sh

ms() { echo $(( $(date +%s%N) / 1000000 )); }

# merges_done URL...: waits (at most 300 s) until no server runs a merge, so that a timed move
# does not share the cores with the merges of the previous by-hand copy's 126 M rows
merges_done() {
    local u w
    for u in "$@"; do
        for w in $(seq 1 1500); do
            [ "$(chq "$u" "SELECT count() FROM system.merges")" = 0 ] && break
            sleep 0.2
        done
        [ "$w" -lt 1500 ] || echo "bench/move.sh: $u still merging after 300 s; timing anyway" >&2
    done
    # and the previous copy's writes on the disk: a timed step that syncs (the catalog's commits,
    # the agents' received files) would otherwise wait behind the writeback of the by-hand
    # copy's 600 MB (at scale 100), which the blog's 14 MB does not cost
    sync
}

# floor_probe URL: what owning the tenant's cold parts costs at the least, on the server of URL
# that holds them (ferry's pointer parts after a move), MOVE_FLOOR trials: their pointer files
# copied durably into a scratch table's detached/ (bench/pointer_copy_floor.py: each file
# fsync'd eight at a time, or one syncfs, alternating), ClickHouse's ATTACH PART of all of them
# (the cheapest statement that makes a server own a part: it loads each one), and their release
# by REPLACE PARTITION from an empty table (the cheapest that makes it let them go). Any move
# pays these three for every cold part, whatever it does around them; one that has the target's
# server load each part before the switch to verify it (ferry's staging table) and then gives
# the real table the part pays the load twice (or a load and a clone, dearer: docs/moves.md
# "Publishing"): min_verified_ms counts the ATTACH twice. One JSON object.
floor_probe() {
    local u=$1 names paths pids rows n k dest att rsql copy t0 t1 t2 trials=()
    names=$(chq "$u" "SELECT name FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' ORDER BY name")
    paths=$(chq "$u" "SELECT path FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' ORDER BY name")
    pids=$(chq "$u" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")
    rows=$(chq "$u" "SELECT sum(rows) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")
    att="" rsql=""
    for n in $names; do att+="${att:+, }ATTACH PART '$n'"; done
    for n in $pids; do rsql+="${rsql:+, }REPLACE PARTITION ID '$n' FROM fl_empty"; done
    chq "$u" "CREATE TABLE IF NOT EXISTS fl_empty AS events" >/dev/null
    for k in $(seq 1 "$MOVE_FLOOR"); do
        chq "$u" "DROP TABLE IF EXISTS fl SYNC" >/dev/null
        chq "$u" "CREATE TABLE fl AS events" >/dev/null
        dest=$(chq "$u" "SELECT arrayJoin(data_paths) FROM system.tables WHERE database = currentDatabase() AND name = 'fl'" | grep /disks/cold/)
        [ -n "$dest" ] || { echo "floor_probe: no cold path for table fl" >&2; exit 1; }
        mkdir -p "${dest}detached"
        sync
        # shellcheck disable=SC2086 # one folder per part
        copy=$(python3 bench/pointer_copy_floor.py "$( ((k % 2)) && echo fsync8 || echo syncfs)" \
            "${dest}detached" $paths) || { echo "floor_probe: the copy failed" >&2; exit 1; }
        t0=$(ms)
        chq "$u" "ALTER TABLE fl $att" >/dev/null
        t1=$(ms)
        [ "$(chq "$u" "SELECT count() FROM fl")" = "$rows" ] ||
            { echo "floor_probe: fl holds $(chq "$u" "SELECT count() FROM fl") rows, not $rows" >&2; exit 1; }
        chq "$u" "ALTER TABLE fl $rsql SETTINGS allow_replace_partition_from_empty_source = 1" >/dev/null
        t2=$(ms)
        trials+=("$(jq -c --argjson a $((t1 - t0)) --argjson r $((t2 - t1)) \
            '{copy_mode: .mode, files: .files, copy_ms: .ms, attach_ms: $a, release_ms: $r,
              sum_ms: (.ms + $a + $r)}' <<<"$copy")")
    done
    chq "$u" "DROP TABLE IF EXISTS fl SYNC" >/dev/null
    chq "$u" "DROP TABLE IF EXISTS fl_empty SYNC" >/dev/null
    printf '%s\n' "${trials[@]}" | jq -sc --argjson parts "$(wc -w <<<"$names")" \
        '{cold_parts: $parts, trials: .,
          min_sum_ms: (map(.sum_ms) | min),
          min_sum_fsync8_ms: (map(select(.copy_mode == "fsync8") | .sum_ms) | min),
          min_verified_ms: (map(.sum_ms + .attach_ms) | min),
          min_verified_fsync8_ms: (map(select(.copy_mode == "fsync8") | .sum_ms + .attach_ms) | min)}'
}

run_size() { # run_size NAME COLD_ROWS_PER_DAY [HOT_ROWS_PER_DAY]
    local name=$1 cold_per=$2 hot_per=${3:-250000}
    local L=$T/$name
    mv_setup "$L" 2 >/dev/null
    local U1 U2 PW
    U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2); PW=$(cat "$L/ferry.password")
    # the cleanup thread every second (by default it backs off to once in 300 s): the set-up's
    # merged-away and moved-away parts are gone before the move is timed (below)
    local u
    for u in "$U1" "$U2"; do
        chq "$u" "ALTER TABLE events MODIFY SETTING cleanup_delay_period = 1,
            max_cleanup_delay_period = 1, cleanup_delay_period_random_add = 0" >/dev/null
    done
    local d
    for d in 0 1 2 3 4; do # one day per INSERT (the same rows as mv_ingest): 25M rows at SCALE 100
        chq "$U1" "INSERT INTO events SELECT 'acme', 20261101 + intDiv(number, $cold_per), 0,
            cityHash64(number, 0) % 100000, cityHash64(number, 0, 1) % 1000000
            FROM numbers($((d * cold_per)), $cold_per)" --max-time 3600 >/dev/null
    done
    [ "$hot_per" = 0 ] || chq "$U1" "INSERT INTO events SELECT 'acme', 20261106 + intDiv(number, $hot_per), 0,
        cityHash64(number, 7) % 100000, number FROM numbers($((3 * hot_per)))
        SETTINGS max_partitions_per_insert_block = 1000" >/dev/null
    for d in 1 2 3 4 5; do
        chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" --max-time 3600 >/dev/null
    done
    local rows; rows=$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")
    # The set-up leaves the hot copies of the 5 days it moved to the cold disk (600 MB at scale
    # 100) as outdated parts. The lab runs with old_parts_lifetime = 0, and ClickHouse may remove
    # a table's outdated parts inside the next ALTER that detaches parts (as tiering's swap did
    # in bench_tier): the move is timed once they are gone, as on a server whose cleanup thread
    # removed them long before. (At scale 100 this made no measurable difference: the source's
    # DETACH PARTITION took 834-867 ms either way, docs/benchmarks.md.)
    local w
    for w in $(seq 1 600); do
        [ "$(chq "$U1" "SELECT count() FROM system.parts WHERE table = 'events' AND NOT active")" = 0 ] && break
        sleep 0.2
    done
    [ "$w" -lt 600 ] || { echo "node1 kept outdated parts of events for 120 s" >&2; exit 1; }

    # ferry: cold partitions as pointer files, hot ones as their part files
    "$FERRY_BIN" rebalance --config "$L/mv.conf" --dry-run >/dev/null
    merges_done "$U1" "$U2"
    local t0 t1
    t0=$(ms)
    "$FERRY_BIN" move --config "$L/mv.conf" --tenant acme --split 0 --to node2 --grace 0 --json \
        >"$T/$name.move" 2>"$T/$name.err" || { cat "$T/$name.err" >&2; exit 1; }
    [ -z "${MOVE_LOG_DIR:-}" ] || cp "$T/$name.err" "$MOVE_LOG_DIR/$name.err" # the move's log
    t1=$(ms)
    local R; R=$(jq -c 'select(.event == "move")' "$T/$name.move")
    [ "$(jq -r .state <<<"$R")" = DONE ] || { echo "move not done: $R" >&2; exit 1; }

    # by hand: node1 reads every row back from node2 over HTTP (Native) and inserts it again
    chq "$U1" "CREATE TABLE reinsert AS events" >/dev/null
    local src="$U2/?user=ferry&password=$PW&query=SELECT%20*%20FROM%20events%20WHERE%20tenant%3D%27acme%27%20FORMAT%20Native"
    local native_bytes
    native_bytes=$(curl -sS -o /dev/null -w '%{size_download}' "$src")
    local t2 t3
    sync
    t2=$(ms)
    chq "$U1" "INSERT INTO reinsert SELECT * FROM url('$src', Native,
        'tenant String, day UInt32, split UInt8, user UInt64, v UInt64')
        SETTINGS max_partitions_per_insert_block = 1000" --max-time 7200 >/dev/null
    t3=$(ms)
    [ "$(chq "$U1" "SELECT count() FROM reinsert")" = "$rows" ] || { echo "re-insert lost rows" >&2; exit 1; }
    local written; written=$(chq "$U1" "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'reinsert'")

    # MOVE_ROUNDS > 1: the tenant goes back and forth that many times in all, each move timed
    # and followed by the same by-hand copy toward the side it left (its medians are printed)
    local rounds=$T/$name.rounds from=node2 to=node1 fu tu
    echo "$((t1 - t0)) $((t3 - t2))" >"$rounds"
    jq -c '.state_ms' <<<"$R" >"$T/$name.states" # each move's milliseconds per state
    for ((k = 2; k <= ${MOVE_ROUNDS:-1}; k++)); do
        fu=$U2 tu=$U1
        [ "$to" = node1 ] || { fu=$U1; tu=$U2; }
        local a0 a1 b0 b1
        merges_done "$U1" "$U2"
        a0=$(ms)
        "$FERRY_BIN" move --config "$L/mv.conf" --tenant acme --split 0 --to "$to" --grace 0 --json \
            >"$T/$name.move$k" 2>"$T/$name.err$k" || { cat "$T/$name.err$k" >&2; exit 1; }
        a1=$(ms)
        [ -z "${MOVE_LOG_DIR:-}" ] || cp "$T/$name.err$k" "$MOVE_LOG_DIR/$name.err$k"
        [ "$(jq -r 'select(.event == "move") | .state' "$T/$name.move$k")" = DONE ] || { echo "move $k not done" >&2; exit 1; }
        chq "$fu" "DROP TABLE IF EXISTS reinsert SYNC" >/dev/null
        chq "$fu" "CREATE TABLE reinsert AS events" >/dev/null
        sync
        b0=$(ms)
        chq "$fu" "INSERT INTO reinsert SELECT * FROM url('$tu/?user=ferry&password=$PW&query=SELECT%20*%20FROM%20events%20WHERE%20tenant%3D%27acme%27%20FORMAT%20Native', Native,
            'tenant String, day UInt32, split UInt8, user UInt64, v UInt64')
            SETTINGS max_partitions_per_insert_block = 1000" --max-time 7200 >/dev/null
        b1=$(ms)
        [ "$(chq "$fu" "SELECT count() FROM reinsert")" = "$rows" ] || { echo "re-insert $k lost rows" >&2; exit 1; }
        echo "$((a1 - a0)) $((b1 - b0))" >>"$rounds"
        jq -c 'select(.event == "move") | .state_ms' "$T/$name.move$k" >>"$T/$name.states"
        local t=$from; from=$to; to=$t
    done
    local floor=null
    [ "${MOVE_FLOOR:-0}" = 0 ] || { merges_done "$U1" "$U2"; floor=$(floor_probe "$(lab_url "$L" "$from")"); }
    local med
    med=$(sort -n -k1,1 "$rounds" | awk '{f[NR]=$1} END {print f[int((NR + 1) / 2)]}')" "$(sort -n -k2,2 "$rounds" | awk '{h[NR]=$2} END {print h[int((NR + 1) / 2)]}')

    jq -cn --arg name "$name" --argjson rows "$rows" --argjson r "$R" --argjson ferry_ms $((t1 - t0)) \
        --argjson reinsert_ms $((t3 - t2)) --argjson native "$native_bytes" --argjson written "$written" \
        --argjson rounds "$(jq -Rsc 'split("\n") | map(select(length > 0) | split(" ") | map(tonumber))' "$rounds")" \
        --argjson med "[${med/ /,}]" --argjson states "$(jq -sc . "$T/$name.states")" \
        --argjson floor "$floor" \
        '{bench: "move", tenant: $name, rows: $rows,
          cold_bytes: $r.cold_bytes, cold_copied_bytes: $r.cold_copied_bytes,
          hot_bytes: $r.hot_bytes, hot_copied_bytes: $r.hot_copied_bytes,
          ferry_wall_ms: $ferry_ms, ferry_state_ms: $r.state_ms, statements: $r.statements,
          agent_requests: $r.agent_requests, catalog_writes: $r.catalog_writes,
          reinsert_wall_ms: $reinsert_ms, reinsert_bytes_read: $native, reinsert_bytes_written: $written,
          bytes_ratio: (($r.cold_copied_bytes + $r.hot_copied_bytes) / ($native + $written)),
          time_ratio: ($ferry_ms / $reinsert_ms)}
         + (if ($rounds | length) > 1 then {rounds_ferry_reinsert_ms: $rounds, rounds_state_ms: $states,
              ferry_median_ms: $med[0], reinsert_median_ms: $med[1],
              median_time_ratio: ($med[0] / $med[1])} else {} end)
         + (if $floor then {floor: $floor} else {} end)'
    "$FERRY_BIN" lab down --dir "$L" >/dev/null
}

sizes=" ${MOVE_SIZES:-blog x$scale cold_only} "
small= big=
[[ "$sizes" != *" blog "* ]] || { small=$(run_size blog 250000); echo "$small"; }
[[ "$sizes" != *" x$scale "* ]] || { big=$(run_size "x$scale" $((250000 * scale))); echo "$big"; }
[[ "$sizes" != *" cold_only "* ]] || run_size cold_only 250000 0
echo "{\"bench\":\"move_load\",\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
# what creating a move's files costs where the labs ran, after them (a file system without a
# journal that saw many files removed lately charges each new one a scan:
# bench/file_create_floor.sh)
bash bench/file_create_floor.sh "$T"
[ -n "$small" ] && [ -n "$big" ] || exit 0
jq -cn --argjson s "$small" --argjson b "$big" \
    '{bench: "move_summary", cold_ratio: ($b.cold_bytes / $s.cold_bytes),
      cold_copied_ratio: ($b.cold_copied_bytes / $s.cold_copied_bytes),
      ferry_time_ratio: ($b.ferry_wall_ms / $s.ferry_wall_ms),
      reinsert_time_ratio: ($b.reinsert_wall_ms / $s.reinsert_wall_ms)}
     + (if $s.ferry_median_ms then {median_time_ratio: ($b.ferry_median_ms / $s.ferry_median_ms)}
        else {} end)
     + (if $s.floor and $b.floor then
          ($s.ferry_median_ms // $s.ferry_wall_ms) as $base
          | {floor_extra_ms: ($b.floor.min_sum_ms - $s.floor.min_sum_ms)}
          + ([["floor_time_ratio", "min_sum_ms"], ["floor_time_ratio_fsync8", "min_sum_fsync8_ms"],
              ["floor_verified_time_ratio", "min_verified_ms"],
              ["floor_verified_time_ratio_fsync8", "min_verified_fsync8_ms"]]
             | map({key: .[0], value: (.[1] as $k | 1 + ($b.floor[$k] - $s.floor[$k]) / $base)})
             | from_entries)
        else {} end)'
