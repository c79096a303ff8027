# A repair's "replace" on ClickHouse 26.5 survives a kill -9 of the repaired replica. 26.5's
# REPLACE PARTITION leaves the replaced parts on disk, outdated, with no empty part covering them
# (26.7 writes one): a restart before old_parts_lifetime (8 min by default) loads them again next
# to the new ones, the partition's rows twice (docs/reliability.md). On a server older than 26.7
# the repair now detaches the target's parts and attaches the source's snapshot in one ALTER
# (DETACH PART leaves nothing to load again). rf 2 on two 26.5 nodes: node2 holds a subset of
# node1's rows of a partition in different parts (so the repair replaces, not copies), repair,
# kill -9 node2 at once, start it again: node2 equal to node1, nothing doubled.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

[ -s "${FERRY_CACHE:-$HOME/.cache/ferry}/chdb-26.5.3/libchdb.so" ] ||
    fail "ClickHouse 26.5 is not installed: run 'scripts/setup.sh --chdb 26.5'"
L=$T/lab
mv_rf2_setup "$L" --stop-merges --version 26.5
C=$L/rf2.conf
assert_contains "$(chq "$U2" "SELECT version()")" "26.5." "node2 runs ClickHouse 26.5"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
ins() { chq "$1" "INSERT INTO events SELECT 'acme', 20261101, 0, number, number * 7 FROM numbers($2, $3)" >/dev/null; }
ins "$U1" 0 1000; ins "$U1" 1000 500   # node1: rows 0..1499 in 2 parts
ins "$U2" 0 500; ins "$U2" 500 500     # node2: rows 0..999 in 2 other parts
"$FERRY_BIN" repair --config "$C" --tenant acme >"$T/r.out" 2>"$T/r.err" || fail "repair: $(tail -3 "$T/r.out") $(tail -3 "$T/r.err")"
assert_contains "$(cat "$T/r.out")" "replace" "the repair replaced node2's partition"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "equal after the repair"
kill -KILL "$(lab_pid "$L" node2)"
wait_for 30 sh -c "[ \"\$('$FERRY_BIN' lab status --dir '$L' --json | jq -r '.nodes[] | select(.name == \"node2\") | .alive')\" = false ]" ||
    fail "node2 did not die"
lab_up "$L"
U2=$(lab_url "$L" node2)
assert_eq 1500 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "node2: 1,500 rows after kill -9 and restart (no replaced part loaded again)"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "still equal after the restart"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM system.detached_parts WHERE table = 'events'")" "no detached leftover"
ok "26.5: a repair's replace, kill -9 of the repaired replica, restart: every row once"
done_testing
