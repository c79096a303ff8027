# A repair round that changes nothing on the target must not make the target's part records a
# copy of the source's (found by the ZooKeeper soak, seed 2413: five server_only drift entries on
# node2, its own cold parts recorded on no server). Replicas of acme: node1 wrote a day in one
# INSERT, node2 the same rows in two (other parts), both tiered on their own, then node1 alone got
# 1,000 more rows: the repair's sync decides to replace node2's partition with a snapshot of
# node1's. It is stopped at the start of that round (FERRY_TEST_STOP_AFTER=SYNC:round), and
# meanwhile node1's parts get new names (DETACH and ATTACH PARTITION: the round finds none of the
# parts it listed and leaves off) and node2 gets the 1,000 rows by its own write. The next round
# finds both equal. The records follow node2's own pointer files (the intent announced for the
# round is replayed), so the sweep finds no drift; before the fix the records were mirrored from
# node1 and node2's own cold parts were recorded on no server.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L" --stop-merges
chq "$U1" "$(mv_day_rows 0 4000)" >/dev/null
chq "$U2" "$(mv_day_rows 0 2000)" >/dev/null
chq "$U2" "$(mv_day_rows 2000 2000)" >/dev/null
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "the same rows on both"
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier: $(tail -3 "$T/tier.err")"
cold() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'"; }
assert_eq "1 2" "$(cold "$U1") $(cold "$U2")" "each replica tiered its own parts"
intents() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND json_extract(doc, '\$.kind') = 'repair-mirror'"; }
sweep() { mv_sweep_summary "$C"; } # "complete drift dangling", the drift to $T/drift.json
assert_eq "true 0 0" "$(sweep)" "the sweep is clean before the repair: $(cat "$T/drift.json")"
EXTRA="INSERT INTO events SELECT 'acme', 20261101, 0, 500000 + number, number FROM numbers(1000)"
chq "$U1" "$EXTRA" >/dev/null
ok "acme's day on both replicas in other parts, each tiered; 1,000 more rows on node1 only"

FERRY_TEST_STOP_AFTER=SYNC:round "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0 \
    >"$T/repair.out" 2>"$T/repair.err" &
RPID=$!
_H_PIDS+=("$RPID") # killed at exit if the test fails while it is stopped
wait_for 120 all_threads_stopped "$RPID" || fail "the repair did not stop at SYNC:round: $(tail -5 "$T/repair.err")"
P="('acme', 20261101, 0)"
chq "$U1" "ALTER TABLE events DETACH PARTITION $P" >/dev/null
chq "$U1" "ALTER TABLE events ATTACH PARTITION $P" >/dev/null
chq "$U2" "$EXTRA" >/dev/null
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "equal again by node2's own write"
kill -CONT "$RPID"
wait "$RPID" || fail "the repair failed after it went on: $(tail -5 "$T/repair.err")"
grep -q 'action=replace repaired=1' "$T/repair.err" ||
    fail "the sync did not end repaired on the replace path: $(grep 'replica sync' "$T/repair.err")"
assert_eq "1 2" "$(cold "$U1") $(cold "$U2")" "node2 keeps its own cold parts: the round changed nothing"
assert_eq 0 "$(intents)" "no intent left"
assert_eq "true 0 0" "$(sweep)" "the sweep after the repair: complete, no drift, no dangling: $(cat "$T/drift.json")"
assert_eq 5000 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows on node2, each once"
ok "a round that left off changed no record: node2's cold parts stay recorded on node2, the sweep is clean"
done_testing
