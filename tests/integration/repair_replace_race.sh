# A repair's replace whose statement the target refuses because one of the parts it listed there
# changed in between (found by the ZooKeeper soak, seed 34202: a merge on the target took a listed
# part; NO_SUCH_DATA_PART). ClickHouse runs the ALTER's commands in order and stops at the one
# that fails: the DETACH PARTs before it had taken their parts, the ATTACH FROM staging never ran,
# so the replica lacked those rows and staging kept its snapshot attached (the sweep's drift). Now
# the parts detached are attached again, staging is emptied, and the next round repairs.
# Replicas of acme: node1 wrote a day in one INSERT, node2 the same rows in two (other parts),
# then node1 alone got 1,000 more rows: the sync replaces node2's partition with a snapshot of
# node1's. It is stopped right after it listed node2's parts (FERRY_TEST_STOP_AFTER=SYNC:listed),
# and meanwhile node2's last part gets a new name (DETACH and ATTACH PART), as a merge would.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L" --stop-merges
chq "$U1" "$(mv_day_rows 0 4000)" >/dev/null
chq "$U2" "$(mv_day_rows 0 2000)" >/dev/null
chq "$U2" "$(mv_day_rows 2000 2000)" >/dev/null
chq "$U1" "INSERT INTO events SELECT 'acme', 20261101, 0, 500000 + number, number FROM numbers(1000)" >/dev/null
parts() { chq "$1" "SELECT name FROM system.parts WHERE active AND table = '$2' ORDER BY name" | tr '\n' ' '; }
mapfile -t P2 < <(chq "$U2" "SELECT name FROM system.parts WHERE active AND table = 'events' ORDER BY name")
assert_eq 2 "${#P2[@]}" "node2 holds the day in two parts"
ok "acme's day on both replicas in other parts; 1,000 more rows on node1 only"

FERRY_TEST_STOP_AFTER=SYNC:listed "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0 \
    >"$T/repair.out" 2>"$T/repair.err" &
RPID=$!
_H_PIDS+=("$RPID") # killed at exit if the test fails while it is stopped
wait_for 120 all_threads_stopped "$RPID" || fail "the repair did not stop at SYNC:listed: $(tail -5 "$T/repair.err")"
# node2's last listed part gets a new name, as a merge would give it
chq "$U2" "ALTER TABLE events DETACH PART '${P2[1]}'" >/dev/null
chq "$U2" "ALTER TABLE events ATTACH PART '${P2[1]}'" >/dev/null
assert_eq 4000 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "node2 still holds its 4,000 rows"
kill -CONT "$RPID"
wait "$RPID" || fail "the repair failed after it went on: $(tail -5 "$T/repair.err")"
grep -q 'the replace was refused; the parts it detached are attached again' "$T/repair.err" ||
    fail "the refused replace was not undone: $(grep -i 'replica sync' "$T/repair.err")"
grep -q 'action=replace repaired=1' "$T/repair.err" ||
    fail "the sync did not end repaired: $(grep 'replica sync' "$T/repair.err")"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
assert_eq 5000 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows on node2, each once"
assert_eq "" "$(parts "$U2" events_ferry_staging)" "node2's staging holds nothing"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE table IN ('events', 'events_ferry_staging')")" \
    "nothing left in detached/ on node2"
ok "a replace refused for a part renamed since the listing: its detaches undone, staging emptied, repaired by the next round"
done_testing
