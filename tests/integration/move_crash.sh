# kill -9 of the mover at every step of a move (test-only crash points, docs/moves.md "Crash
# recovery": FERRY_TEST_CRASH_BEFORE=<state> before the flow engine commits the move's transition
# to it, FERRY_TEST_CRASH_AFTER=<state>:<what> inside a state), then resume:
# the data is identical (fingerprints per partition), nothing is duplicated or lost, the slice is
# served by the target only, and no shadow/ or detached/ folder is left on either node. At every
# point the move's data record jobs/move.ID is at the state of its record moves/ID (both are
# written in one catalog batch), and both are DONE once resumed.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
C="$L/mv.conf"
mv_ingest "$U1" acme 1 4 20000
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 1) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 1)
src=node1; dst=node2
# the state journaled in the record <parent>/<name> (moves/ID, or the data record jobs/move.ID)
journal_state() { sqlite3 "$L/catalog.db" "SELECT json_extract(doc, '\$.state') FROM records WHERE parent = '$1' AND name = '$2'"; }
for point in CRASH_AFTER=CLONE:sent CRASH_BEFORE=VERIFY CRASH_BEFORE=SWITCH CRASH_AFTER=SWITCH:switched \
             CRASH_AFTER=SWITCH:caught-up CRASH_AFTER=SWITCH:published-one CRASH_AFTER=SWITCH:attached \
             CRASH_BEFORE=CLEANUP \
             CRASH_AFTER=CLEANUP:detached CRASH_BEFORE=DONE; do
    expect_exit 137 env "FERRY_TEST_$point" "$FERRY_BIN" move --config "$C" --tenant acme \
        --split 1 --to $dst --grace 200
    assert_contains "$ERR" "test crash point reached" "crashed at $point"
    id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
    [ -n "$id" ] || fail "no unfinished move after a crash at $point"
    assert_eq "$(journal_state moves "$id")" "$(journal_state jobs "move.$id")" "jobs/move.$id at the state of moves/$id after a crash at $point"
    # a second mover is refused while ... nobody holds it now: resume
    "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >"$T/resume.out" 2>"$T/resume.err" ||
        fail "resume after $point failed: $(cat "$T/resume.err")"
    assert_contains "$(cat "$T/resume.out")" "(resumed)" "resumed after $point"
    assert_eq "DONE DONE" "$(journal_state moves "$id") $(journal_state jobs "move.$id")" "both records DONE after $point"
    [ "$dst" = node2 ] && du=$U2 su=$U1 || { du=$U1; su=$U2; }
    assert_eq "$want" "$(mv_fp "$du" acme 1)" "data identical on $dst after a crash at $point"
    assert_eq 0 "$(chq "$su" "SELECT count() FROM events WHERE tenant = 'acme'")" "$src empty after $point"
    assert_eq 0 "$(chq "$du" "SELECT count() FROM events_ferry_staging")" "staging empty after $point"
    assert_eq "$dst" "$("$FERRY_BIN" route --config "$C" --tenant acme --split 1 --json | jq -r '.slices[0].shards[0]')" "route after $point"
    mv_no_residue "$L"
    ok "kill -9 after $point, resumed: identical, nothing duplicated, no residue"
    t=$src; src=$dst; dst=$t
done
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -s "$u/ferry/status" | jq .refused_deletes)" "no delete attempted"; done

# two movers never run one move: a mover holding the lease refuses a second one
FERRY_TEST_CRASH_AFTER=none "$FERRY_BIN" move --config "$C" --tenant acme --split 1 --to $dst --grace 20000 >/dev/null 2>"$T/m1.err" &
M1=$!
wait_for 90 grep -q 'routing switched' "$T/m1.err" || fail "first mover did not switch: $(cat "$T/m1.err")"
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
expect_exit 1 "$FERRY_BIN" move --config "$C" --resume "$id"
assert_contains "$ERR" "is being run by another mover" "second mover refused"
wait "$M1" || fail "first mover failed: $(cat "$T/m1.err")"
ok "a second mover of the same move is refused (lease)"

# a server stopped inside ATTACH PARTITION keeps detached/attaching_X (ClickHouse renames each
# part while it loads it); the resumed move sends X again and must still attach it
t=$src; src=$dst; dst=$t
[ "$dst" = node2 ] && du=$U2 su=$U1 || { du=$U1; su=$U2; }
FERRY_TEST_CRASH_AFTER=CLONE:sent expect_exit 137 "$FERRY_BIN" move --config "$C" --tenant acme \
    --split 1 --to $dst --grace 200
read -r dpath dname <<<"$(chq "$du" "SELECT path, name FROM system.detached_parts WHERE table = 'events_ferry_staging' ORDER BY name LIMIT 1 FORMAT TSV")"
[ -n "$dname" ] && [ -d "$dpath" ] || fail "no part waiting in $dst's staging detached/ after CLONE:sent"
mv "${dpath%/}" "$(dirname "${dpath%/}")/attaching_$dname"
id=$(sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
"$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >"$T/resume.out" 2>"$T/resume.err" ||
    fail "resume with an attaching_ leftover failed: $(tail -3 "$T/resume.err")"
assert_contains "$(cat "$T/resume.err")" "ATTACH met parts left by an ATTACH cut short" "the leftover was named"
assert_eq "$want" "$(mv_fp "$du" acme 1)" "data identical on $dst"
assert_eq 0 "$(chq "$su" "SELECT count() FROM events WHERE tenant = 'acme'")" "$src empty"
mv_no_residue "$L"
ok "a part left as attaching_$dname by an ATTACH cut short: removed, the resumed move attached its new copy"

# between the source's pin of ClickHouse's own cold parts and their REPLACE (split 2: two days
# moved to the cold disk by ClickHouse on node1): the resume finds the counts raised and replaces
mv_ingest "$U1" acme 2 3 20000
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 2) TO DISK 'cold'" >/dev/null; done
want2=$(mv_fp "$U1" acme 2)
expect_exit 137 env FERRY_TEST_CRASH_AFTER=CLEANUP:pinned "$FERRY_BIN" move --config "$C" \
    --tenant acme --split 2 --to node2 --grace 200
assert_contains "$ERR" "parts=2 held=2" "the two native cold parts pinned before the crash"
"$FERRY_BIN" move --config "$C" --resume all --grace 200 >"$T/resume.out" 2>"$T/resume.err" ||
    fail "resume after CLEANUP:pinned failed: $(cat "$T/resume.err")"
assert_contains "$(cat "$T/resume.err")" "by_replace=3 to_detach=0" "resumed: all three days released by REPLACE"
assert_eq "$want2" "$(mv_fp "$U2" acme 2)" "split 2 identical on node2"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme' AND split = 2")" "node1 holds nothing of split 2"
mv_no_residue "$L"
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -s "$u/ferry/status" | jq .refused_deletes)" "no delete attempted"; done
ok "kill -9 after the source's pin, resumed: released by REPLACE, identical, no residue"
done_testing
