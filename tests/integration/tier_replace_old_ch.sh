# Tiering on ClickHouse 26.5 survives a kill -9 right after the swap. 26.5's REPLACE PARTITION
# leaves the parts it replaced on disk as outdated, with no empty part covering them (26.7
# writes one), until old_parts_lifetime (8 min by default) has passed: a server killed before
# that loads them again next to the new cold parts, the partition's rows twice (found by the
# mixed-version test; docs/reliability.md). On a server older than 26.7 tiering now swaps by
# DETACH PART + ATTACH PARTITION FROM staging and empties staging by DETACH (26.5 loads neither
# again). A 26.5 node with ClickHouse's default old_parts_lifetime: tier (a partition of 2
# parts, one of a single part, and a partition with late rows), kill -9 the node at once,
# start it again: every partition once, staging empty, then tier again after late rows.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

[ -s "${FERRY_CACHE:-$HOME/.cache/ferry}/chdb-26.5.3/libchdb.so" ] ||
    fail "ClickHouse 26.5 is not installed: run 'scripts/setup.sh --chdb 26.5'"
L=$T/lab
tier_lab "$L" --nodes 1 --version 26.5
C=$L/ferry.conf
U=$(lab_url "$L" node1)
assert_contains "$(chq "$U" "SELECT version()")" "26.5." "the node runs ClickHouse 26.5"
tier_create "$U"
for b in 0 1; do
    chq "$U" "INSERT INTO events SELECT number % 2 + 1, toYYYYMMDD($TODAY - 6), 0,
        toDateTime($TODAY - 6) + number % 86400, number % 977, number + $b * 1000000
        FROM numbers(20000)" >/dev/null
done
chq "$U" "INSERT INTO events SELECT 3, toYYYYMMDD($TODAY - 7), 0, toDateTime($TODAY - 7), 1, number FROM numbers(500)" >/dev/null
want=$(tier_fp "$U")
kill_restart() {
    kill -KILL "$(lab_pid "$L" node1)"
    wait_for 30 sh -c "[ \"\$('$FERRY_BIN' lab status --dir '$L' --json | jq -r '.nodes[0].alive')\" = false ]" ||
        fail "node1 did not die"
    lab_up "$L"
    U=$(lab_url "$L" node1)
}
staged() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table LIKE 'events\\_ferry%'"; }
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier: $(tail -3 "$T/t1.err")"
assert_eq 3 "$(jq .partitions_tiered "$T/t1.json")" "three partitions tiered"
assert_eq "attach attach attach" "$(jq -r '[.jobs[].swap] | join(" ")' "$T/t1.json")" "26.5: swapped by DETACH PART + ATTACH, never REPLACE"
assert_eq "$want" "$(tier_fp "$U")" "same data before the kill"
kill_restart
assert_eq "$want" "$(tier_fp "$U")" "same data after kill -9 and restart: no replaced part loaded again"
assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name != 'cold'")" "every part still cold"
assert_eq 0 "$(staged)" "staging (and its twin) empty after the restart"
ok "26.5: tiered, kill -9 right after, restarted: every partition once, staging empty"

# late rows into a cold partition, tiered again (the attach form with cold parts present), kill
chq "$U" "INSERT INTO events SELECT 1, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), 5, number + 5000000 FROM numbers(300)" >/dev/null
want=$(tier_fp "$U")
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier late rows: $(tail -3 "$T/t2.err")"
assert_eq 1 "$(jq .partitions_tiered "$T/t2.json")" "the late rows tiered"
kill_restart
assert_eq "$want" "$(tier_fp "$U")" "late rows: same data after kill -9 and restart"
assert_eq 0 "$(staged)" "staging empty"
ok "26.5: late rows tiered into a cold partition, kill -9, restart: every row once"
done_testing
