# `ferry rewrite` on ClickHouse 26.5 survives a kill -9 of the server right after the swap, and of
# itself inside it. 26.5's REPLACE PARTITION leaves the parts it replaced on disk with no empty
# part covering them until old_parts_lifetime (8 min by default): a server killed before that
# loads the old cold parts again next to the rebuilt ones (the erased rows back, every row twice;
# docs/reliability.md). On a server older than 26.7 the rewrite swaps by DETACH PART of the source
# parts + ATTACH PARTITION FROM the build table, and removes the detached pointer files (never
# an object). A 26.5 node with ClickHouse's default old_parts_lifetime: tier 3 days of acme,
# erase one user from day 1, kill -9 the node at once and start it again: the user's rows gone
# exactly, every other row once, the partition cold again, nothing detached left; then a rewrite
# killed between the journaled swap and the statement's end, resumed by a plain re-run.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

[ -s "${FERRY_CACHE:-$HOME/.cache/ferry}/chdb-26.5.3/libchdb.so" ] ||
    fail "ClickHouse 26.5 is not installed: run 'scripts/setup.sh --chdb 26.5'"
L=$T/lab
lab_up "$L" --nodes 1 --version 26.5
mv_conf "$L"
C=$L/mv.conf
U=$(lab_url "$L" node1)
assert_contains "$(chq "$U" "SELECT version()")" "26.5." "the node runs ClickHouse 26.5"
chq "$U" "CREATE TABLE events (tenant String, day UInt32, split UInt8, user_id UInt64, v UInt64)
    ENGINE = MergeTree PARTITION BY (tenant, day, split) ORDER BY (user_id)
    SETTINGS storage_policy = 'tiered'" >/dev/null
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
PER=20000
for b in 0 1; do # two parts per partition
    chq "$U" "INSERT INTO events SELECT 'acme', 20261101 + intDiv(number, $PER), 0,
        cityHash64(number, $b) % 500, number + $b * 1000000 FROM numbers($((3 * PER)))
        SETTINGS max_partitions_per_insert_block = 100" >/dev/null
done
"$FERRY_BIN" tier --config "$C" --older-than 1d --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "ferry tier failed: $(tail -3 "$T/tier.err")"
assert_eq 3 "$(jq .partitions_tiered "$T/tier.json")" "3 partitions tiered"
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"

cnt() { chq "$U" "SELECT count() FROM events WHERE $1"; }
fp_rest() { chq "$U" "SELECT _partition_id, count(), sum(cityHash64(*)) FROM events WHERE $1 GROUP BY _partition_id ORDER BY _partition_id"; }
kill_restart() {
    kill -KILL "$(lab_pid "$L" node1)"
    wait_for 30 sh -c "[ \"\$('$FERRY_BIN' lab status --dir '$L' --json | jq -r '.nodes[0].alive')\" = false ]" ||
        fail "node1 did not die"
    lab_up "$L"
    U=$(lab_url "$L" node1)
}
check_erased() { # USER BEFORE REST: the user's rows of day 1 gone, every other row once, cold
    assert_eq 0 "$(cnt "day = 20261101 AND user_id = $1")" "user $1's rows of day 1 gone"
    assert_eq "$2" "$(cnt 1)" "exactly user $1's rows of day 1 gone, nothing loaded twice"
    assert_eq "$3" "$(fp_rest "NOT (day = 20261101 AND user_id = $1)")" "every other row identical"
    assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name != 'cold'")" "every part cold again"
    assert_eq "" "$(chq "$U" "SELECT table, name FROM system.detached_parts WHERE table LIKE 'events%'")" "no detached part left"
    assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_rewrite'")" "build table empty"
    mv_no_residue "$L"
}

# ---- a rewrite, then kill -9 of the server at once ------------------------------------------
gone=$(cnt "day = 20261101 AND user_id = 7")
[ "$gone" -gt 0 ] || fail "user 7 has no rows on day 1"
total=$(cnt 1); rest=$(fp_rest "NOT (day = 20261101 AND user_id = 7)")
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 7" --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "the rewrite finished"
assert_contains "$ERR" "the rewrite swaps by DETACH PART and ATTACH" "26.5: the attach form, not REPLACE PARTITION"
check_erased 7 $((total - gone)) "$rest"
kill_restart
check_erased 7 $((total - gone)) "$rest"
ok "26.5: rewrite (DETACH PART + ATTACH), kill -9 of the server right after, restart: user 7's $gone rows gone, every other row once"

# ---- the rewrite killed right after its swap statement, the server too, then a re-run ----------
gone=$(cnt "day = 20261101 AND user_id = 8")
[ "$gone" -gt 0 ] || fail "user 8 has no rows on day 1"
total=$(cnt 1); rest=$(fp_rest "NOT (day = 20261101 AND user_id = 8)")
expect_exit 137 env FERRY_TEST_REWRITE_CRASH_AFTER=REPLACED "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 8"
assert_eq "" "$(chq "$U" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%' AND disk_name = 'cold'")" "after the swap: no cold part of day 1 active"
kill_restart
assert_eq $((total - gone)) "$(cnt 1)" "after kill -9 of both: the swapped partition, no replaced part loaded again"
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 8" --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "the re-run finished the job"
check_erased 8 $((total - gone)) "$rest"
assert_eq 0 "$("$FERRY_BIN" catalog export --config "$C" | jq '[.jobs[]? | select(.kind == "rewrite" and .state != "DONE")] | length')" "no rewrite job left unfinished"
ok "26.5: rewrite killed after its swap, server killed too, re-run: user 8's rows gone, every other row once, nothing left"

# ---- the attach form half done: the swap journaled, one source part detached, then a re-run ---
gone=$(cnt "day = 20261101 AND user_id = 9")
[ "$gone" -gt 0 ] || fail "user 9 has no rows on day 1"
chq "$U" "INSERT INTO events SELECT 'acme', 20261101, 0, 9, number + 5000000 FROM numbers(50)" >/dev/null
"$FERRY_BIN" tier --config "$C" --older-than 1d >/dev/null 2>"$T/tier2.err" || fail "tier late rows: $(tail -3 "$T/tier2.err")"
gone=$(cnt "day = 20261101 AND user_id = 9")
total=$(cnt 1); rest=$(fp_rest "NOT (day = 20261101 AND user_id = 9)")
n_src=$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%'")
[ "$n_src" -ge 2 ] || fail "day 1 should have 2 or more cold parts now, has $n_src"
expect_exit 137 env FERRY_TEST_REWRITE_CRASH_AFTER=SWAP_JOURNALED "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 9"
first=$(chq "$U" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%' ORDER BY name LIMIT 1")
chq "$U" "ALTER TABLE events DETACH PART '$first'" >/dev/null # the statement's first half
expect_exit 0 "$FERRY_BIN" rewrite --config "$C" --tenant acme --days 20261101 --delete-where "user_id = 9" --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "the re-run finished the half-done swap"
assert_contains "$ERR" "resuming the attach form" "the re-run resumed the attach form"
check_erased 9 $((total - gone)) "$rest"
kill_restart
check_erased 9 $((total - gone)) "$rest"
ok "26.5: the attach form cut after one DETACH PART of $n_src, re-run, then kill -9: user 9's rows gone, every other row once"
done_testing
