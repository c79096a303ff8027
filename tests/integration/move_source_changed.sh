# CLEANUP's check of the source (docs/moves.md, "Verification"): before it detaches the slice on
# the source, a move makes sure the source holds nothing the target lacks, without reading a row.
# The mover is killed before CLEANUP (FERRY_TEST_CRASH_BEFORE=CLEANUP), then the source changes:
#  - a merge (OPTIMIZE ... FINAL of a partition of two parts): the parts differ from the journaled
#    digest, but no part is above the journaled top (block numbers and mutation versions of a
#    MergeTree come from one counter per table), so the resumed move finishes without reading the
#    rows (no fingerprint statement in its log), the target holds every row once;
#  - a write that reached the old server after the switch (an INSERT straight into it): the
#    resumed move stops, names the new part, and keeps the source as it is.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C="$L/mv.conf"
for u in "$U1" "$U2"; do chq "$u" "SYSTEM STOP MERGES events" >/dev/null; done
mv_ingest "$U1" acme 1 3 20000 0
mv_ingest "$U1" acme 1 3 20000 7
parts() { chq "$1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition = '(''acme'',20261101,1)'"; }
assert_eq 2 "$(parts "$U1")" "two parts in acme's first partition on node1"
want=$(mv_fp "$U1" acme 1)
unfinished() { sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }

# ---- a merge on the source after the switch ------------------------------------------------------
expect_exit 137 env FERRY_TEST_CRASH_BEFORE=CLEANUP "$FERRY_BIN" move --config "$C" --tenant acme \
    --split 1 --to node2 --grace 200
assert_contains "$ERR" "test crash point reached" "the mover was killed before CLEANUP"
id=$(unfinished)
[ -n "$id" ] || fail "no unfinished move after the crash"
top=$(sqlite3 "$L/catalog.db" "SELECT json_extract(json_extract(doc, '\$.data'), '\$.fp.events.top') FROM records WHERE parent = 'jobs' AND name = 'move.$id'")
[[ "$top" =~ ^[0-9]+$ ]] || fail "the journal has no top for events: '$top' ($(sqlite3 "$L/catalog.db" "SELECT doc FROM records WHERE parent = 'jobs' AND name = 'move.$id'"))"
chq "$U1" "SYSTEM START MERGES events" >/dev/null
chq "$U1" "OPTIMIZE TABLE events PARTITION ('acme', 20261101, 1) FINAL" >/dev/null
assert_eq 1 "$(parts "$U1")" "the partition merged into one part on node1"
FERRY_LOG_LEVEL=debug "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >"$T/r1.out" 2>"$T/r1.err" ||
    fail "resume after a merge on the source failed: $(tail -5 "$T/r1.err")"
assert_eq DONE "$(sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = 'moves' AND name = '$id'")" "the move is DONE"
! grep -q 'groupBitXor' "$T/r1.err" || fail "the resumed CLEANUP read rows: $(grep groupBitXor "$T/r1.err" | head -2)"
assert_eq "$want" "$(mv_fp "$U2" acme 1)" "every row once on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "node1 holds nothing of acme"
mv_no_residue "$L"
ok "merged on the source after the switch: the resumed move finished without reading a row"

# ---- a write that reached the old server after the switch ----------------------------------------
chq "$U1" "SYSTEM STOP MERGES events" >/dev/null
expect_exit 137 env FERRY_TEST_CRASH_BEFORE=CLEANUP "$FERRY_BIN" move --config "$C" --tenant acme \
    --split 1 --to node1 --grace 200
id=$(unfinished)
[ -n "$id" ] || fail "no unfinished move after the second crash"
chq "$U2" "INSERT INTO events VALUES ('acme', 20261102, 1, 1, 424242)" >/dev/null
rows=$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")
expect_exit 1 "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200
assert_contains "$ERR" "changed after it was verified" "the resumed move stops"
assert_contains "$ERR" "was written since" "and names the part written since"
assert_contains "$ERR" "nothing was removed" "and says the source is kept"
assert_eq "$rows" "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "node2 keeps every row, the late one too"
assert_eq 1 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme' AND v = 424242")" "the late row is on node2"
ok "a write on the old server after the switch: the move stops before CLEANUP detaches anything"
done_testing
