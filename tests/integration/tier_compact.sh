# A due partition of many small hot parts is merged into one before tiering (found by the chaos
# soak: a node that could not merge for a while tiered partitions of about 80 parts each, and
# ATTACH read every pointer part through the object store: 1,700 ATTACHes, 15 minutes). A
# partition of 40 parts tiers as one cold part with the same rows; one of 10 parts tiers as it
# is; merges a cut run left stopped start again first, unless a job's unverified swap needs them
# stopped (then the compaction is skipped, logged, and the partition tiers as it is). Background merges are off for the table (max_bytes_to_merge_* = 1 byte), so
# only OPTIMIZE merges.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
tier_no_bg_merges "$U"
fill() { tier_parts "$U" "$1" "$2" "$3" 200; } # TENANT DAYS_AGO PARTS
parts() { chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '($1,%' AND disk_name = '$2'"; }
fill 1 5 40
fill 2 5 10
assert_eq 40 "$(parts 1 default)" "40 hot parts of tenant 1"
want1=$(tier_fp "$U" "tenant = 1")
want2=$(tier_fp "$U" "tenant = 2")

"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t1.json" 2>"$T/t1.err" || fail "tier: $(tail -3 "$T/t1.err")"
assert_eq 1 "$(jq .partitions_compacted "$T/t1.json")" "one partition compacted: $(jq -c . "$T/t1.json")"
assert_contains "$(cat "$T/t1.err")" "partition compacted before tiering" "the compaction is logged"
assert_eq "1 0" "$(parts 1 cold) $(parts 1 default)" "tenant 1: one cold part"
assert_eq "10 0" "$(parts 2 cold) $(parts 2 default)" "tenant 2 (10 parts): tiered as it was"
assert_eq "$want1" "$(tier_fp "$U" "tenant = 1")" "tenant 1: same rows"
assert_eq "$want2" "$(tier_fp "$U" "tenant = 2")" "tenant 2: same rows"
ok "a partition of 40 small parts tiers as one cold part; one of 10 parts as it was; same rows"

# merges left stopped on the table by a tiering cut between SYSTEM STOP MERGES and the journal
# write that records it (found by the chaos soak: node2 piled up ~900 parts a partition, each an
# ATTACH through the object store): no tier job needs them stopped, so the run starts them
# again and compacts
fill 3 5 20
chq "$U" "SYSTEM STOP MERGES events" >/dev/null
want3=$(tier_fp "$U" "tenant = 3")
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/t2.json" 2>"$T/t2.err" || fail "tier: $(tail -3 "$T/t2.err")"
assert_contains "$(cat "$T/t2.err")" "merges of a table of piled-up parts started" "the restart is logged"
assert_eq 1 "$(jq .partitions_compacted "$T/t2.json")" "merges started again, then compacted: $(jq -c . "$T/t2.json")"
assert_eq "1 0" "$(parts 3 cold) $(parts 3 default)" "tenant 3: one cold part"
assert_eq "$want3" "$(tier_fp "$U" "tenant = 3")" "tenant 3: same rows"
ok "merges a cut run left stopped start again when no tier job needs them stopped; compacted"

# a job whose swap may have run and is not verified (crashed right after its swap choice was
# journaled) needs the table's merges stopped (I6): a run that does not resume it (another
# tenant asked for) leaves them so, and the partition of 20 parts tiers as it is
fill 4 5 2
fill 5 5 20
fill 6 0 2 # today's: stays hot, OPTIMIZE of it tells whether merges run
P6=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition LIKE '(6,%'")
want4=$(tier_fp "$U" "tenant = 4")
want5=$(tier_fp "$U" "tenant = 5")
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SWAP "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 4
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 5 --json >"$T/t3.json" 2>"$T/t3.err" || fail "tier: $(tail -3 "$T/t3.err")"
assert_contains "$(cat "$T/t3.err")" "a tier job's swap is not verified yet" "the hold is logged"
assert_eq 0 "$(jq .partitions_compacted "$T/t3.json")" "nothing compacted while a swap is unverified"
assert_contains "$(cat "$T/t3.err")" "partition not compacted before tiering" "the skip is logged"
assert_eq "20 0" "$(parts 5 cold) $(parts 5 default)" "tenant 5: its 20 parts tiered as they were"
assert_eq "$want5" "$(tier_fp "$U" "tenant = 5")" "tenant 5: same rows"
code=$(curl -sS -o "$T/opt.out" -w '%{http_code}' "$U/" --data-binary "OPTIMIZE TABLE events PARTITION ID '$P6' FINAL")
[ "$code" != 200 ] || fail "merges run on events after tenant 5's swap, while tenant 4's swap is not verified"
assert_contains "$(cat "$T/opt.out")" "merg" "OPTIMIZE refused: merges stopped"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
assert_eq 1 "$(jq .jobs_resumed <<<"$OUT")" "the crashed job resumed: $OUT"
assert_eq "$want4" "$(tier_fp "$U" "tenant = 4")" "tenant 4: same rows"
tier_merges_on "$U" "$P6"
ok "an unverified swap keeps merges stopped: no compaction, tiered as it is; merges run once it is verified"
done_testing
