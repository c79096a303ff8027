# A tier swap cut by kill -9 of the node can leave a swapped-in cold part broken: ClickHouse
# rewrites a pointer file in place when ATTACH PARTITION ... FROM staging hard-links it (its
# reference count), and a kill in the middle leaves the file empty (ClickHouse #113179); at
# restart the part goes to detached/ as broken-on-start, staging's copy too (the same inode).
# The chaos soak of session 32 met it: the job stopped in VERIFY with the partition's rows out of
# the table (its frozen hot parts detached by the swap's first half) until a person acted.
# Made here deterministically: the tier run is stopped right after its swap statement ran
# (FERRY_TEST_CRASH_AFTER=SWAP:ran), the node is killed, one swapped-in part's pointer file is
# emptied, and the node is started again. The resumed run undoes the swap (the other swapped-in
# parts detached, the frozen hot parts attached back from detached/, the broken folders removed),
# rolls the job back and tiers the partition again at once. The data is the same after the mend,
# and no delete reaches the store. A crash in the middle of the mend (after it is
# journaled, after its statement) is resumed the same way. A broken part that is not the swap's
# (below the partition's blocks before the swap) is not touched: the job stops, naming it.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"

# kill -9 of the node, the pointer file $2 of the active part $1 of events emptied, restart
break_part() { # PART FILE
    local path
    path=$(chq "$U" "SELECT path FROM system.parts WHERE active AND table = 'events' AND name = '$1'")
    [ -f "$path$2" ] || fail "no pointer file $2 in part $1 (at '$path')"
    kill -KILL "$(lab_pid "$L" node1)"
    wait_for 30 sh -c "[ \"\$('$FERRY_BIN' lab status --dir '$L' --json | jq -r '.nodes[0].alive')\" = false ]" ||
        fail "node1 did not die"
    : >"$path$2"
    lab_up "$L"
    U=$(lab_url "$L" node1)
}
broken() { chq "$U" "SELECT table, name FROM system.detached_parts WHERE startsWith(name, 'broken') ORDER BY table, name"; }
# the parts the swap added to partition $1 (cold, active), by name
swapped_in() { chq "$U" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$1' AND disk_name = 'cold' ORDER BY name"; }
tier_t() { # TENANT [env...]: ferry tier of one tenant's old days
    local k=$1; shift
    "$@" "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k" --json >"$T/t.out" 2>"$T/t.err"
}
not_tried_delete() { assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "$1: ClickHouse never tried to delete"; }

# ---- 1. one of three swapped-in parts broken; resumed: undone, rolled back, tiered again ----
tier_parts "$U" 1 5 3 20000
pid=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '1-%'")
want=$(tier_fp "$U" "tenant = 1")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP:ran "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1
mapfile -t added < <(swapped_in "$pid")
assert_eq 3 "${#added[@]}" "the swap ran: three cold parts in the table (${added[*]})"
break_part "${added[1]}" checksums.txt
b=$(broken)
assert_contains "$b" "broken-on-start_${added[1]}" "the emptied part was detached as broken at restart ($b)"
assert_eq 40000 "$(chq "$U" "SELECT count() FROM events WHERE tenant = 1")" "the broken part's rows are out of the table"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1 --json
assert_contains "$ERR" "swap undone" "the resumed run says it undid the swap"
assert_contains "$ERR" "broken-on-start_${added[1]}" "and names the broken part"
assert_contains "$ERR" "runs again, merges held: its swap was undone" "and tiers the partition again"
assert_eq 1 "$(jq .jobs_retried <<<"$OUT")" "one job retried ($OUT)"
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "none failed ($OUT)"
assert_eq DONE "$(jq -r '.jobs[-1].state' <<<"$OUT")" "the partition tiered again ($OUT)"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "undone and tiered again: the partition's rows once"
assert_eq "" "$(broken)" "no broken folder left"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$pid'")" "the partition is cold"
tier_leftovers "$L" node1
not_tried_delete "undone and tiered again"
ok "a swapped-in part broken by a kill -9: the resumed run undoes the swap and tiers the partition again"

# ---- 2. the only swapped-in part broken; the run killed after the mend is journaled, then after
#         its statement; each resume finishes it ----
for point in AFTER=VERIFY:mend AFTER=VERIFY:mend-ran; do
    k=$([ "$point" = AFTER=VERIFY:mend ] && echo 2 || echo 3)
    tier_parts "$U" "$k" 5 1 30000
    pid=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$k-%'")
    want=$(tier_fp "$U" "tenant = $k")
    expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP:ran "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k"
    mapfile -t added < <(swapped_in "$pid")
    assert_eq 1 "${#added[@]}" "$point: the swap ran (${added[*]})"
    break_part "${added[0]}" count.txt
    assert_contains "$(broken)" "broken-on-start_${added[0]}" "$point: detached as broken"
    expect_exit 137 env "FERRY_TEST_CRASH_$point" "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k"
    expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant "$k" --json
    assert_contains "$ERR" "swap undone" "$point: the resume undid the swap"
    # after the journal only: the resume runs the whole statement; after it: nothing is left
    # to attach (the frozen part was attached under a new name), only folders to remove
    if [ "$point" = AFTER=VERIFY:mend ]; then a=1; else a=0; fi
    assert_contains "$ERR" "detached=0 attached=$a" "$point: the resumed mend did what was left"
    assert_eq DONE "$(jq -r '.jobs[-1].state' <<<"$OUT")" "$point: tiered again ($OUT)"
    assert_eq "$want" "$(tier_fp "$U" "tenant = $k")" "$point: the partition's rows once"
    assert_eq "" "$(broken)" "$point: no broken folder left"
    tier_leftovers "$L" node1
    not_tried_delete "$point"
    ok "a mend cut at $point: resumed, the partition whole, tiered again"
done

# ---- 3. a broken folder that is not the swap's (named below the partition's blocks before the
#         swap): the job does not undo the swap on its account, it stops naming it ----
tier_parts "$U" 4 5 2 10000
pid=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '4-%'")
want=$(tier_fp "$U" "tenant = 4")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP:ran "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4
mapfile -t added < <(swapped_in "$pid")
assert_eq 2 "${#added[@]}" "the swap ran (${added[*]})"
# one swapped-in part taken out by hand and its folder named as an old broken part would be
chq "$U" "ALTER TABLE events DETACH PART '${added[0]}'" >/dev/null
path=$(chq "$U" "SELECT path FROM system.detached_parts WHERE table = 'events' AND name = '${added[0]}'")
old="broken-on-start_${pid}_0_0_0"
mv "${path%/}" "$(dirname "${path%/}")/$old"
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4 --json
assert_contains "$ERR" "do not hold the frozen" "VERIFY stops the job"
assert_contains "$ERR" "$old" "naming the broken folder that is not the swap's"
case "$ERR" in *"swap undone"*) fail "the swap was undone: $ERR" ;; esac
assert_eq "$old" "$(chq "$U" "SELECT name FROM system.detached_parts WHERE table = 'events' AND startsWith(name, 'broken')")" "the folder is left as it is"
# a person puts the part back: the resume verifies and finishes
mv "$(dirname "${path%/}")/$old" "${path%/}"
chq "$U" "ALTER TABLE events ATTACH PART '${added[0]}'" >/dev/null
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4 --json
assert_eq DONE "$(jq -r '.jobs[0].state' <<<"$OUT")" "once put back by a person, the job finishes ($OUT)"
assert_eq "$want" "$(tier_fp "$U" "tenant = 4")" "same data"
tier_leftovers "$L" node1
not_tried_delete "foreign broken folder"
ok "a broken folder of the partition that is not the swap's: not touched, the job waits for a person"

done_testing
