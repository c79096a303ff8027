# A repair cut between changing a replica and recording it (found by the chaos soak: five
# server_only drift entries on node2 that no later run mended, because the next repair found the
# partition in sync and never mirrored the part records). The repair journals its intent to
# mirror before the first change on the target (job record repair-mirror.*, lib/flow/
# repair_mirror.h); the next repair of the slice replays it from the target's own pointer files.
#   1. killed after copying a cold partition's pointer parts to node2 (REPAIR:copied): node2
#      holds them, the records name node1 only (the sweep's server_only drift) and the intent is
#      open; the next repair finds the partition in sync, makes the records name node2 and
#      removes the intent; the sweep is clean.
#   2. killed after filling node2's staging table with cold parts (SYNC:staged), and node2 then
#      gets the rows another way (in sync again): the next repair empties the staging partition
#      (its pointer files were references no record names) and removes the intent.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L"
mv_ingest "$U1" acme 0 3 4000 # node1: 2026-11-01..03
mv_ingest "$U2" acme 0 1 4000 # node2: the same first day, missed the other two
intents() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'jobs' AND json_extract(doc, '\$.kind') = 'repair-mirror'"; }
sweep() { mv_sweep_summary "$C"; } # "complete drift dangling", the drift to $T/drift.json
staging_parts() { chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging'"; }

"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json >"$T/tier1.json" 2>"$T/tier1.err" ||
    fail "tier: $(tail -3 "$T/tier1.err")"
[ "$(chq "$U1" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" -ge 3 ] ||
    fail "node1's partitions were not tiered: $(cat "$T/tier1.json")"
assert_eq "true 0 0" "$(sweep)" "the sweep is clean before the repair: $(cat "$T/drift.json")"
ok "3 cold partitions on node1, node2 missed 2 of them; the sweep is clean"

# ---- 1. killed after the copy, before the records ---------------------------------------------
expect_exit 137 env FERRY_TEST_CRASH_AFTER=REPAIR:copied "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_eq 1 "$(intents)" "the intent to mirror is open after the kill"
read -r complete ndrift ndangling <<<"$(sweep)"
[ "$complete $ndangling" = "true 0" ] && [ "$ndrift" -ge 1 ] ||
    fail "expected server_only drift on node2 after the kill, got complete=$complete drift=$ndrift dangling=$ndangling: $(cat "$T/drift.json")"
assert_eq node2 "$(jq -r '[.[] | select(.kind == "server_only") | .server] | unique | join(",")' "$T/drift.json")" "the drift: node2 holds pointer parts the records do not list it for"
ok "a repair killed after copying leaves node2's references unrecorded ($ndrift drift) and its intent open"

expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_contains "$ERR" "an earlier run was cut between copying and recording" "the replay is logged"
assert_eq 0 "$(intents)" "no intent left"
assert_eq "true 0 0" "$(sweep)" "the sweep after the replay: complete, no drift, no dangling: $(cat "$T/drift.json")"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
ok "the next repair replays the intent: the records follow node2's pointer files, the sweep is clean"

# ---- 2. killed with the staging table filled, then in sync another way --------------------------
chq "$U1" "INSERT INTO events SELECT 'acme', 20261104, 0, number, number * 7 FROM numbers(3000)" >/dev/null
"$FERRY_BIN" tier --config "$C" --older-than 3d --tenant acme --json >"$T/tier2.json" 2>"$T/tier2.err" ||
    fail "tier: $(tail -3 "$T/tier2.err")"
expect_exit 137 env FERRY_TEST_CRASH_AFTER=SYNC:staged "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_eq 1 "$(intents)" "the intent is open after the kill"
[ "$(staging_parts)" -ge 1 ] || fail "node2's staging table holds nothing after the kill"
read -r complete ndrift ndangling <<<"$(sweep)"
[ "$ndrift" -ge 1 ] || fail "expected drift from node2's staging table, got $ndrift: $(cat "$T/drift.json")"
# the rows reach node2 another way (hot, written there): the partition is in sync again
chq "$U2" "INSERT INTO events SELECT 'acme', 20261104, 0, number, number * 7 FROM numbers(3000)" >/dev/null
expect_exit 0 "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0
assert_contains "$ERR" "an earlier run was cut between copying and recording" "the replay is logged"
assert_eq 0 "$(staging_parts)" "node2's staging partition emptied"
assert_eq 0 "$(intents)" "no intent left"
assert_eq "true 0 0" "$(sweep)" "the sweep after the replay: complete, no drift, no dangling: $(cat "$T/drift.json")"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "acme equal on both replicas"
assert_eq 15000 "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "acme's rows on node2, each once"
ok "a sync killed with staging filled: the replay empties node2's staging partition, the sweep is clean"
done_testing
