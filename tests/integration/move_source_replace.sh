# A move's CLEANUP empties the source's partitions by REPLACE PARTITION from ferry's empty twin
# table where that cannot delete an object (lib/flow/move_release.c): hot partitions, and cold
# ones whose pointer files ferry's agent wrote (ref_count 1: ClickHouse's later removal of the
# outdated parts lowers the count and deletes nothing). A cold partition ClickHouse moved to the
# object disk itself (its pointer files say 0: the removal would delete the objects, which the
# target now references) is pinned first by the source's agent (lib/agent/pin.c: its counts
# raised to 1 and synced), then replaced too; the lab's store refuses and counts every delete
# ClickHouse tries, so a pin ClickHouse did not honour would show. DETACH, the way before,
# clones every pointer file into detached/ (about 1 s for 40 cold parts; REPLACE about 50 ms:
# docs/benchmarks.md, "Session 29").
# The publish step likewise: the cold partitions go into the target's table by ATTACH PARTITION
# FROM staging (a clone: every pointer file's ref_count raised), and staging is emptied by
# REPLACE from the twin; the hot one by MOVE PARTITION (lib/flow/move_publish.c).
# Checked: which way each partition went, the target's rows, the source and the target's
# staging empty once ClickHouse removed the outdated parts, no object deleted or attempted, and
# the sweep finds no drift.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

MV_DDL="$MV_DDL$MV_FAST_CLEANUP" # the replaced parts removed while the test waits
L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1)
U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 20000 # 2026-11-01..03: tiered by ferry below (ferry-owned cold parts)
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier failed: $(tail -3 "$T/tier.err")"
assert_eq 3 "$(jq .partitions_tiered "$T/tier.json")" "3 partitions tiered by ferry"
# 2026-11-04 moved to the cold disk by ClickHouse itself (native: ref_count 0), 2026-11-10 hot
chq "$U1" "INSERT INTO events SELECT 'acme', 20261104, 0, number % 1000, number FROM numbers(5000)" >/dev/null
chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 20261104, 0) TO DISK 'cold'" >/dev/null
chq "$U1" "INSERT INTO events SELECT 'acme', 20261110, 0, number % 1000, number FROM numbers(5000)" >/dev/null
assert_eq "cold 4 default 1" "$(chq "$U1" "SELECT arrayStringConcat(groupArray(concat(d, ' ', toString(c))), ' ') FROM (SELECT disk_name AS d, uniqExact(partition_id) AS c FROM system.parts WHERE active AND table = 'events' GROUP BY d ORDER BY d)")" "4 cold partitions, 1 hot"
want=$(mv_fp "$U1" acme 0)
keys() { (cd "$L/blobs" && find . -type f | sort); }
keys >"$T/keys.before"

"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 0 --json >"$T/mv.json" 2>"$T/mv.err" ||
    fail "move failed: $(tail -5 "$T/mv.err")"
assert_eq DONE "$(jq -r 'select(.event == "move") | .state' "$T/mv.json")" "move done"
# the native partition's parts, every one held (one part; two when the INSERT above was split)
pinned=$(grep -o "own cold parts pinned\" .* parts=[0-9]* held=[0-9]* files_raised=[0-9]*" "$T/mv.err" | tail -n 1)
[[ "$pinned" =~ parts=([0-9]+)\ held=([0-9]+)\ files_raised=[1-9] ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] ||
    fail "the native cold part pinned on the source: '$pinned' in: $(grep -i pin "$T/mv.err" | head -5)"
assert_contains "$(cat "$T/mv.err")" "by_replace=5 to_detach=0" "3 ferry-owned cold, the pinned native one and the hot partition released by REPLACE"
assert_contains "$(cat "$T/mv.err")" "by_attach=4 by_move=1" "4 cold partitions published by ATTACH FROM staging, the hot one by MOVE PARTITION"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "the target holds the rows"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table = 'events'")" "nothing of the slice active on the source"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM system.detached_parts WHERE table = 'events'")" "nothing detached left on the source"
# source_released URL NODE: the replaced parts are outdated now, and the lab's cleanup thread
# removes them (old_parts_lifetime 0); then no delete was attempted, no object is gone, and the
# sweep is complete with no drift and nothing dangling
# outdated_gone URL TABLE: waits until the cleanup thread removed table's outdated parts
outdated_gone() {
    local u=$1 tb=$2
    no_outdated() { [ "$(chq "$u" "SELECT count() FROM system.parts WHERE NOT active AND table = '$tb'")" = 0 ]; }
    wait_for 120 no_outdated || fail "$u kept outdated parts of $tb: $(outdated_parts "$u" "$tb")"
}
source_released() {
    local u=$1 n=$2 target=$3
    outdated_gone "$u" events
    # the target's staging: its published parts removed too, and nothing of the slice left there
    outdated_gone "$target" events_ferry_staging
    assert_eq 0 "$(chq "$target" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table = 'events_ferry_staging'")" "the target's staging holds nothing"
    assert_eq 0 "$(curl -sS "$target/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object on the target"
    assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object on $n"
    keys >"$T/keys.$n"
    assert_eq "" "$(comm -23 "$T/keys.before" "$T/keys.$n")" "no object gone from the store"
    expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
    assert_eq "true 0 0" "$(jq -r '"\(.complete) \(.drift | length) \(.dangling | length)"' <<<"$OUT")" "sweep complete, no drift, nothing dangling"
}
source_released "$U1" node1 "$U2"
ok "the source released by REPLACE (ferry-owned cold, native cold once pinned, hot): same rows, nothing deleted"

# back to node1: every cold part on node2 is ferry's now (pointer files the agent received)
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node1 --grace 0 --json >"$T/mv2.json" 2>"$T/mv2.err" ||
    fail "move back failed: $(tail -5 "$T/mv2.err")"
assert_contains "$(cat "$T/mv2.err")" "by_replace=5 to_detach=0" "every partition released by REPLACE"
assert_contains "$(cat "$T/mv2.err")" "by_attach=4 by_move=1" "published by ATTACH FROM staging again"
assert_eq "$want" "$(mv_fp "$U1" acme 0)" "node1 holds the rows again"
source_released "$U2" node2 "$U1"
ok "moved back: all five partitions released by REPLACE, nothing deleted, no drift"
done_testing
