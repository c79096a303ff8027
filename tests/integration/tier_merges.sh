# Tiering keeps the table merging (found by the chaos soak: SYSTEM STOP MERGES ran from FREEZE to
# the swap, a slow store kept a wave uploading for minutes and interrupted jobs kept merges stopped
# until a later run, and node2 piled up 26,813 parts). Merges are now stopped only around the swap
# and its verification (lib/flow/tier.c, I6):
#   1. while a wave uploads (a slow store: the agent pauses after each part) an OPTIMIZE of
#      another partition runs, and one of the partition being tiered merges its frozen parts
#      away; the job is rolled back and run again in a wave that holds merges, and finishes;
#   2. a tiering killed after its freeze (journaled in UPLOAD) leaves the table merging; the
#      re-run finds the frozen parts merged away before it uploads anything of them, runs the job
#      again and finishes it with the same data;
#   3. a tiered partition that got rows since (late rows: cold parts beside new hot ones) tiers
#      in a wave that holds merges from its freeze: an OPTIMIZE during its upload is refused, and
#      the job is not run again;
#   4. late rows of more than 16 hot parts (piled up) tier in a plain wave: merges run during
#      their upload;
#   5. late rows of more than 64 hot parts (piled up while merges stopped) are left to merges:
#      the run skips the partition (partitions_waiting_merges) and a later one tiers it.
# Background merges are off for the table (max_bytes_to_merge_* = 1 byte: no part is small
# enough), so only the test's OPTIMIZE FINAL merges, and only when merges are not stopped.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
FERRY_AGENT_TEST_SLOW_UPLOAD_MS=400 tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_no_bg_merges "$U"
fill() { tier_parts "$U" "$1" "$2" "$3" 3000; } # TENANT DAYS_AGO PARTS
pid_of() { chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '$1-%'"; }
nparts() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition_id = '$1'"; }

fill 1 5 8 # the partition tiered: 8 parts
fill 2 0 3 # today's, stays hot: 3 parts
P1=$(pid_of 1)
P2=$(pid_of 2)
assert_eq 8 "$(nparts "$P1")" "8 parts to tier (no background merge)"
want=$(tier_fp "$U" "tenant = 1")

# ---- 1. merges run during the upload; a merge of the frozen parts sends the job round again ----
bg_start "$T/t1.err" bash -c '"$0" tier --config "$1" --older-than 3d --json >"$2"' \
    "$FERRY_BIN" "$C" "$T/t1.json"
TIER_PID=$BG_PID
frozen() { [ -n "$(ls -A "$L/node1/data/shadow" 2>/dev/null | grep -v '^increment.txt$')" ]; }
wait_for 60 frozen || fail "no freeze within 60 s: $(tail -5 "$T/t1.err")"
chq "$U" "OPTIMIZE TABLE events PARTITION ID '$P2' FINAL" >/dev/null ||
    fail "OPTIMIZE of another partition during the upload failed: merges are stopped"
chq "$U" "OPTIMIZE TABLE events PARTITION ID '$P1' FINAL" >/dev/null ||
    fail "OPTIMIZE of the partition being tiered during the upload failed: merges are stopped"
assert_eq 1 "$(nparts "$P2")" "the other partition merged during the upload"
wait "$TIER_PID" || fail "tier failed: $(jq -c '[.jobs[] | {state, error}]' "$T/t1.json" 2>/dev/null) $(tail -5 "$T/t1.err")"
OUT=$(cat "$T/t1.json")
assert_eq 1 "$(jq .jobs_retried <<<"$OUT")" "the job whose frozen parts were merged ran again ($OUT)"
assert_contains "$(cat "$T/t1.err")" "nothing was attached or swapped" "the merged-away job went round again before its ATTACH"
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "nothing failed"
assert_eq DONE "$(jq -r '[.jobs[].state] | join(" ")' <<<"$OUT")" "the job finished"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data, nothing doubled or lost"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1'")" "tiered"
tier_leftovers "$L" node1
fill 2 0 2
tier_merges_on "$U" "$P2"
assert_eq 1 "$(nparts "$P2")" "merges run after the tiering"
# the rolled-back first try's objects stay in the store, unreferenced (ferry never deletes
# outside the sweep): every recorded object is there, the others are the first try's only, and
# the sweep finds them as orphans and nothing dangling
keys_check() { # PIDS (a regex: the partitions that had a rolled-back try)
    local missing extra
    missing=$(comm -13 <(tier_local_keys "$L") <(tier_catalog_keys "$C"))
    [ -z "$missing" ] || fail "recorded objects missing from the store: $missing"
    extra=$(comm -23 <(tier_local_keys "$L") <(tier_catalog_keys "$C"))
    [ -n "$extra" ] || fail "no object of the rolled-back try in the store"
    grep -Eqv "^default/events/($1)/ferry_tier_[0-9a-f]*_1/" <<<"$extra" &&
        fail "unrecorded objects other than the first try's: $extra"
    expect_exit 0 "$FERRY_BIN" sweep --json --config "$C"
    assert_eq "true $(wc -l <<<"$extra") 0" "$(jq -r '"\(.complete) \(.orphans | length) \(.dangling | length)"' <<<"$OUT")" "the sweep: complete, the first try's objects orphans, nothing dangling"
}
keys_check "$P1"
ok "merges ran during the upload; the job whose frozen parts merged ran again with merges held, same data"

# ---- 2. killed after its freeze: the table still merges; the re-run finishes --------------------
fill 3 5 4
P3=$(pid_of 3)
want=$(tier_fp "$U" "tenant = 3")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=UPLOAD "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 3
tier_merges_on "$U" "$P3"
assert_eq 1 "$(nparts "$P3")" "the killed job's partition merged: merges were not left stopped"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 3 --json
assert_eq 1 "$(jq .jobs_resumed <<<"$OUT")" "resumed ($OUT)"
assert_eq 1 "$(jq .jobs_retried <<<"$OUT")" "its frozen parts were merged away: run again"
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "nothing failed"
assert_eq "$want" "$(tier_fp "$U" "tenant = 3")" "same data after the crash"
# nothing of the old freeze went to the store (the ZooKeeper soak at 51932ec resumed a wave of
# about 6,000 parts frozen during its faults, uploaded them and wrote their pointer parts for 7
# minutes, and only its ATTACH found them gone)
first=$(tier_local_keys "$L" | grep -E "^default/events/$P3/ferry_tier_[0-9a-f]*_1/" || true)
[ -z "$first" ] || fail "the resumed job uploaded the parts its freeze no longer had: $first"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P3'")" "tiered after the crash"
tier_leftovers "$L" node1
fill 2 0 2
tier_merges_on "$U" "$P2"
keys_check "$P1|$P3"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "a tiering killed after its freeze left the table merging; the re-run saw the frozen parts merged before uploading them, and finished"

# tier_frozen_optimize N: starts `ferry tier` in the background ($T/tN.json, $T/tN.err; its pid in
# TIER_PID), waits for its freeze, then asks for an OPTIMIZE of the other partition: the HTTP code
# in $code, the answer in $T/optN.out
tier_frozen_optimize() {
    bg_start "$T/t$1.err" bash -c '"$0" tier --config "$1" --older-than 3d --json >"$2"' \
        "$FERRY_BIN" "$C" "$T/t$1.json"
    TIER_PID=$BG_PID
    wait_for 60 frozen || fail "no freeze within 60 s: $(tail -5 "$T/t$1.err")"
    code=$(curl -sS -o "$T/opt$1.out" -w '%{http_code}' "$U/" --data-binary "OPTIMIZE TABLE events PARTITION ID '$P2' FINAL")
}

# ---- 3. late rows: a tiered partition that got rows since holds merges from its freeze -------------
# (the chaos soak: fresh parts of finished days, merged within seconds of their insert, sent 78 of
# one run's 87 jobs round again, each after a whole upload)
fill 1 5 3 # three new hot parts beside tenant 1's cold ones
fill 2 0 2 # and the other partition can merge again
want=$(tier_fp "$U" "tenant = 1")
tier_frozen_optimize 3
[ "$code" != 200 ] || fail "merges ran while a partition with late rows was uploading"
assert_contains "$(cat "$T/opt3.out")" "merg" "OPTIMIZE refused: merges stopped"
wait "$TIER_PID" || fail "tier failed: $(jq -c '[.jobs[] | {state, error}]' "$T/t3.json" 2>/dev/null) $(tail -5 "$T/t3.err")"
OUT=$(cat "$T/t3.json")
assert_eq "1 0 0" "$(jq -r '"\(.jobs_late_rows) \(.jobs_retried) \(.jobs_failed)"' <<<"$OUT")" "one job with late rows, held from its freeze, not run again ($OUT)"
assert_contains "$(cat "$T/t3.err")" "partitions with late rows tier in a wave that holds merges" "the hold is logged"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1'")" "the late rows tiered"
tier_leftovers "$L" node1
tier_merges_on "$U" "$P2"
keys_check "$P1|$P3"
ok "a tiered partition's late rows tier in one wave that holds merges from its freeze: nothing run again, same data, merges run after"

# ---- 4. late rows of many parts tier in a plain wave: merges run during their upload ----------------
# (the ZooKeeper soak of session 27: a held wave of 18-21 piled-up partitions, 269-373 hot parts
# each, stopped a table's merges again right after a run had started them)
fill 1 5 17 # seventeen new hot parts beside tenant 1's cold ones: more than TIER_LATE_HOLD_PARTS
fill 2 0 2
want=$(tier_fp "$U" "tenant = 1")
tier_frozen_optimize 4
[ "$code" = 200 ] || fail "merges were stopped while 17 late hot parts uploaded: $(cat "$T/opt4.out")"
assert_eq 1 "$(nparts "$P2")" "the other partition merged during the upload"
wait "$TIER_PID" || fail "tier failed: $(jq -c '[.jobs[] | {state, error}]' "$T/t4.json" 2>/dev/null) $(tail -5 "$T/t4.err")"
OUT=$(cat "$T/t4.json")
assert_eq "0 0" "$(jq -r '"\(.jobs_late_rows) \(.jobs_failed)"' <<<"$OUT")" "not held from its freeze, nothing failed ($OUT)"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1'")" "the late rows tiered"
tier_leftovers "$L" node1
ok "late rows of more than 16 hot parts tier in a plain wave: merges run during the upload, same data"

# ---- 5. late rows of more than 64 hot parts wait for merges ---------------------------------------
# (the ZooKeeper soak of session 29: node2's merges stopped for 9 minutes, then one run uploaded 18
# partitions of 740-1,690 late hot parts each, one object set and one ATTACH per part, for 21
# minutes through the soak's s3rver while the table piled up more)
tier_parts "$U" 1 5 65 10 # 65 new hot parts of 10 rows beside tenant 1's cold ones
want=$(tier_fp "$U" "tenant = 1")
hot1() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1' AND disk_name = 'default'"; }
assert_eq 65 "$(hot1)" "65 late hot parts"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t5.json" 2>"$T/t5.err" || fail "tier: $(tail -5 "$T/t5.err")"
OUT=$(cat "$T/t5.json")
assert_eq "1 0 0" "$(jq -r '"\(.partitions_waiting_merges) \(.jobs | length) \(.jobs_failed)"' <<<"$OUT")" "the partition waits for merges, no job ($OUT)"
assert_contains "$(cat "$T/t5.err")" "its late rows piled up in hot parts" "the skip is logged"
assert_eq 65 "$(hot1)" "its hot parts are as they were"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
# the table merges again: its background merges take the hot parts down (never the cold ones: the
# cold volume is prefer_not_to_merge), and the next run tiers the late rows
chq "$U" "ALTER TABLE events MODIFY SETTING max_bytes_to_merge_at_max_space_in_pool = 161061273600,
    max_bytes_to_merge_at_min_space_in_pool = 1048576" >/dev/null
few_hot() { [ "$(hot1)" -le 16 ]; }
wait_for 120 few_hot || fail "the table's merges left $(hot1) hot parts in 120 s"
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t6.json" 2>"$T/t6.err" || fail "tier: $(tail -5 "$T/t6.err")"
OUT=$(cat "$T/t6.json")
assert_eq "0 1 0" "$(jq -r '"\(.partitions_waiting_merges) \(.partitions_tiered) \(.jobs_failed)"' <<<"$OUT")" "merged down, then tiered ($OUT)"
assert_eq "$want" "$(tier_fp "$U" "tenant = 1")" "same data"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P1'")" "the late rows tiered"
tier_leftovers "$L" node1
ok "late rows of more than 64 hot parts are left to merges: skipped, counted, nothing changed; tiered once merged"

done_testing
