# Inodes before a tier swap (docs/operations.md "Room on the disks"): `ferry tier` checks, next to
# the bytes unreserved, that the table's policy disks keep [cluster] min_free_inodes free besides
# ~32 inodes per partition of the wave (the agent's statvfs f_favail). A lab node's data is on
# the machine's file system, so the threshold is set above the real count: the jobs stop before
# their swap with a message naming inodes, nothing reaches the cold disk, the data is
# unchanged; with the default threshold the next run tiers them. A swap begun before the room
# ran out goes on: killed after its swap statement ran, the job is resumed under the same
# threshold, verified and finished, and the table merges again (held back, it kept the merges
# stopped while parts piled up: the ZooKeeper soak of session 16 ran node4 out of inodes so).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_fill "$U" 1 20000 6
want=$(tier_fp "$U")
tok=$(cat "$L/node1/agent.token")
inodes=$(curl -sf -H "Authorization: Bearer $tok" "$U/agent/v1/status" | jq '[.disks[] | select(.remote | not) | .free_inodes] | min')
[ "$inodes" -gt 0 ] || fail "the agent reports no free inodes"

C2=$T/inodes.conf
sed "/^\[cluster\]/a min_free_inodes = $((inodes * 2))" "$C" >"$C2"
grep -q "^min_free_inodes = " "$C2" || fail "no [cluster] section in $C"
expect_exit 1 "$FERRY_BIN" tier --config "$C2" --older-than 3d --json
grep -q "free inodes; tiering" <<<"$OUT" || fail "the swap failed for another reason: $OUT"
grep -q "min_free_inodes = $((inodes * 2))" <<<"$OUT" || fail "the message does not name the threshold: $OUT"
case "$(jq -r '[.jobs[].state] | unique | join(" ")' <<<"$OUT")" in
REPLACE | FAILED) ;;
*) fail "the jobs went past their swap: $(jq -c '[.jobs[].state]' <<<"$OUT")" ;;
esac
assert_eq "$want" "$(tier_fp "$U")" "rows unchanged"
assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "nothing swapped to the cold disk"
ok "min_free_inodes above node1's free inodes: no swap ($(jq -r '.jobs[0].error' <<<"$OUT" | head -c 160)...)"

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "no job failed"
assert_eq "$want" "$(tier_fp "$U")" "rows unchanged after tiering"
[ "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" -gt 0 ] || fail "nothing tiered"
ok "with the default min_free_inodes the next run finishes the jobs"

# fill_with_hot K: tenant K's six old days, and a hot partition of two parts (HOTPID), whose
# OPTIMIZE ... FINAL fails while the table's merges are stopped; want: the rows before
fill_with_hot() {
    tier_fill "$U" "$1" 20000 6
    for i in 1 2; do chq "$U" "INSERT INTO events SELECT $1, toYYYYMMDD($TODAY), 0, now(), 1, number FROM numbers(10)" >/dev/null; done
    HOTPID=$(chq "$U" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$1-%' ORDER BY partition_id DESC LIMIT 1")
    want=$(tier_fp "$U")
}

# a swap begun, then no room: it is finished all the same, and merges run again
fill_with_hot 2
expect_exit 137 env FERRY_TEST_CRASH_BEFORE=VERIFY "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 2
expect_exit 0 "$FERRY_BIN" tier --config "$C2" --older-than 3d --tenant 2 --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "no job failed"
jq -e '[.jobs[] | select(.state != "DONE")] | length == 0' <<<"$OUT" >/dev/null ||
    fail "a job begun before the room ran out did not finish: $OUT"
assert_eq "$want" "$(tier_fp "$U")" "rows unchanged"
tier_merges_on "$U" "$HOTPID"
ok "a swap begun before min_free_inodes was raised is verified and finished, merges run again"

# a swap chosen and journaled but never run, then no room: held back, and the choice taken back
# so the table merges meanwhile; once there is room the next run tiers it
fill_with_hot 3
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 3
expect_exit 1 "$FERRY_BIN" tier --config "$C2" --older-than 3d --tenant 3 --json
grep -q "free inodes; tiering" <<<"$OUT" || fail "the swap was held back for another reason: $OUT"
assert_eq "$want" "$(tier_fp "$U")" "rows unchanged while held back"
tier_merges_on "$U" "$HOTPID"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 3 --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "no job failed once there is room"
assert_eq "$want" "$(tier_fp "$U")" "rows unchanged after tiering"
ok "a swap journaled but not run is held back without stopping merges, then finished"
done_testing
