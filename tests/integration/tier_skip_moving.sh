# Tiering leaves a slice alone while a move of it is unfinished (found by the chaos soak: a
# tiering pass on a move's target, between the routing switch and the publish step, chose
# "REPLACE PARTITION" from the rows the target's table held then, and the rows MOVE PARTITION
# brought in from staging afterwards were lost). A move stopped after CLONE (crash point
# FERRY_TEST_CRASH_BEFORE=VERIFY) keeps
# the slice moving: `ferry tier` skips its partitions on both sides (logged) and tiers the other
# slice; once the move is resumed and done, the next run tiers the slice on its new shard with
# the same data.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
mv_ingest "$U1" acme 0 3 5000
mv_ingest "$U1" beta 0 3 5000 7
want=$(mv_fp "$U1" acme 0)
cold() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$2''%' AND disk_name = 'cold'"; }
FERRY_TEST_CRASH_BEFORE=VERIFY expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 200
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
[ -n "$id" ] || fail "no unfinished move"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier: $(tail -3 "$T/t1.err")"
assert_contains "$(cat "$T/t1.err")" "partition skipped: its slice is moving" "the skip is logged"
assert_eq 0 "$(cold "$U1" acme)" "acme (moving) not tiered on node1"
[ "$(cold "$U1" beta)" -gt 0 ] || fail "beta (not moving) was not tiered: $(cat "$T/t1.json")"
ok "a slice with an unfinished move is not tiered (the other slice is)"
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >/dev/null 2>"$T/r.err" || fail "resume: $(tail -3 "$T/r.err")"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier after the move: $(tail -3 "$T/t2.err")"
[ "$(cold "$U2" acme)" -gt 0 ] || fail "acme not tiered on node2 after its move: $(cat "$T/t2.json")"
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "acme's data on node2 unchanged"
ok "once the move is done the next run tiers the slice on its new shard, same data"
done_testing
