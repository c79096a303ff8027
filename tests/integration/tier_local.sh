# Tiering in the blog's lab, local object store, 2 nodes: one tenant with 2 million rows over 8
# days on node1 (and a small one on node2); `ferry tier --older-than 3d` tiers 5 days on each.
# Checks: the data per partition unchanged (counts, sums, distinct counts, row hashes); the old
# days on the cold disk, the recent ones hot; ClickHouse never tried to delete an object (the
# lab's delete guard counts refusals: 0); the objects ferry uploaded are exactly the files of the
# frozen parts, byte for byte, and exactly what the catalog records; nothing left behind; staging
# emptied from its empty twin, and ClickHouse's removal of the replaced pointer parts deletes no
# object. Then late rows into a tiered day, tiered again: nothing lost, the old cold part
# untouched. Then the coordinator's scheduled mode tiers late rows by itself.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 2
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
tier_create "$U1"; tier_create "$U2"
tier_fill "$U1" 42 2000000 8
tier_fill "$U2" 7 80000 8
for u in "$U1" "$U2"; do chq "$u" "OPTIMIZE TABLE events FINAL" >/dev/null; done
old="day <= toYYYYMMDD($TODAY - 4)"
pday="toUInt32(splitByChar('-', partition_id)[2])"   # the day, in system.parts
pold="$pday <= toYYYYMMDD($TODAY - 4)"
assert_eq 5 "$(chq "$U1" "SELECT uniqExact(_partition_id) FROM events WHERE $old")" "5 old days"
B1=$(tier_fp "$U1"); B2=$(tier_fp "$U2")

# the frozen parts will be exactly today's active parts of the old days: keep a copy of what a
# FREEZE of them holds (FREEZE does not take every file of a live part, e.g. metadata_version.txt)
tier_copy_frozen "$L" node1 "$pold" "$T/frozen"
nfiles=$(find "$T/frozen" -type f | wc -l)
[ "$nfiles" -gt 20 ] || fail "copied only $nfiles files"

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --dry-run --json
assert_eq 10 "$(jq '.planned | length' <<<"$OUT")" "dry run lists 5 partitions per node"
[ -z "$(ls -A "$L/blobs")" ] || fail "dry run uploaded something"
ok "dry run: 10 partitions planned, nothing changed"

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
R=$OUT
assert_eq 10 "$(jq .partitions_tiered <<<"$R")" "partitions tiered"
assert_eq 0 "$(jq .jobs_failed <<<"$R")" "no job failed"
assert_eq attach "$(jq -r '[.jobs[].swap] | unique | join(",")' <<<"$R")" "swapped by DETACH PART and ATTACH PARTITION FROM staging"
for s in FREEZE UPLOAD POINTERS ATTACH REPLACE VERIFY CLEANUP; do
    jq -e --arg s "$s" '.step_ms[$s] > 0' <<<"$R" >/dev/null || fail "no time for step $s"
done
[ "$(jq .pointer_bytes <<<"$R")" -gt 0 ] || fail "no pointer bytes reported"
ok "ferry tier: 10 partitions on 2 nodes, $(jq .bytes_uploaded <<<"$R") bytes uploaded, $(jq .pointer_bytes <<<"$R") pointer bytes"

assert_eq "$B1" "$(tier_fp "$U1")" "node1: data per partition unchanged"
assert_eq "$B2" "$(tier_fp "$U2")" "node2: data per partition unchanged"
assert_eq 2000000 "$(chq "$U1" "SELECT count() FROM events")" "node1 rows"
for u in "$U1" "$U2"; do
    assert_eq "cold	5" "$(chq "$u" "SELECT disk_name, uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND $pold GROUP BY disk_name")" "old days cold"
    assert_eq "default	3" "$(chq "$u" "SELECT disk_name, uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND NOT ($pold) GROUP BY disk_name")" "recent days hot"
done
ok "rows, sums, distinct counts and row hashes unchanged; 5 days cold, 3 hot on each node"

# objects: exactly the frozen files of node1 (plus node2's), byte for byte
n1keys=$(tier_local_keys "$L" | grep -c "^default/events/42-")
assert_eq "$nfiles" "$n1keys" "node1's objects = files of its frozen parts"
tier_match_frozen "$T/frozen" "$L/blobs/default/events"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "objects in the store = objects the catalog records"
total=$(find "$L/blobs" -type f | wc -l)
for n in node1 node2; do
    u=$(lab_url "$L" $n)
    assert_eq 0 "$(curl -sS "$u/ferry/status" | jq .refused_deletes)" "$n: ClickHouse never tried to delete"
    tier_leftovers "$L" $n
done
E=$("$FERRY_BIN" catalog export --config "$C")
assert_eq 10 "$(jq '[.partitions[] | select(.tier == "cold")] | length' <<<"$E")" "10 cold partitions recorded"
jq -e '.parts[] | select(.servers == ["node1"] or .servers == "node1")' <<<"$E" >/dev/null || fail "part records lack their server: $(jq -c '.parts[0].servers' <<<"$E")"
jq -e '[.parts[].objects[] | select(.checksum | test("^(cityhash128|sha256):[0-9a-f]{32,64}$") | not)] | length == 0' <<<"$E" >/dev/null ||
    fail "objects without checksums"
assert_eq 5 "$(jq '[.parts[] | select(.partition_id | startswith("42-"))] | length' <<<"$E")" "one part record per frozen part"
assert_eq 2000000 "$(jq '[.partitions[] | select(.server == "node1")] | map(.rows) | add + 0' <<<"$E" | awk '{print $1 + 3*250000}')" "catalog rows"
ok "objects byte for byte = frozen files = catalog records; no delete attempt; no leftovers"

# staging's partitions were emptied from the empty twin (REPLACE PARTITION ... FROM
# events_ferry_empty): ClickHouse removes the replaced pointer parts itself; with its cleanup made
# fast here, that removal lowers their ref_count and deletes no object
assert_eq 0 "$(chq "$U1" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging'")" "staging holds no active part"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM system.parts WHERE table = 'events_ferry_empty'")" "the twin is empty"
[ "$(chq "$U1" "SELECT count() FROM system.parts WHERE NOT active AND rows > 0 AND table = 'events_ferry_staging'")" -gt 0 ] ||
    fail "no replaced pointer part in staging: was it emptied by DETACH?"
chq "$U1" "ALTER TABLE events_ferry_staging MODIFY SETTING old_parts_lifetime = 1, cleanup_delay_period = 1, cleanup_delay_period_random_add = 0, max_cleanup_delay_period = 1" >/dev/null
staging_gone() { [ "$(chq "$U1" "SELECT count() FROM system.parts WHERE rows > 0 AND table = 'events_ferry_staging'")" = 0 ]; }
wait_for 120 staging_gone || fail "ClickHouse did not remove staging's replaced parts"
assert_eq 0 "$(curl -sS "$U1/ferry/status" | jq .refused_deletes)" "no delete attempt when they went"
assert_eq "$B1" "$(tier_fp "$U1")" "node1: data unchanged after staging's parts went"
assert_eq "$total" "$(find "$L/blobs" -type f | wc -l)" "no object removed"
ok "staging emptied from its empty twin; ClickHouse removed the replaced pointer parts and no object"

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
assert_eq 0 "$(jq .partitions_tiered <<<"$OUT")" "second run: nothing to do"
assert_eq "$total" "$(find "$L/blobs" -type f | wc -l)" "second run: no object added or removed"
ok "second run tiers nothing and touches no object"

# ---- late rows into a tiered day ------------------------------------------------------------
PID=$(chq "$U1" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND $pday = toYYYYMMDD($TODAY - 8) LIMIT 1")
cold_before=$(chq "$U1" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$PID'")
fp_cold=$(tier_fp "$U1" "_part = '$cold_before'")
chq "$U1" "INSERT INTO events SELECT 42, toYYYYMMDD($TODAY - 8), 0, toDateTime($TODAY - 8), 1, 5000000 + number FROM numbers(1000)" >/dev/null
chq "$U1" "INSERT INTO events SELECT 42, toYYYYMMDD($TODAY - 8), 0, toDateTime($TODAY - 8), 2, 6000000 + number FROM numbers(500)" >/dev/null
want=$(chq "$U1" "SELECT count(), sum(value) FROM events WHERE _partition_id = '$PID'")
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --server node1 --json
assert_eq 1 "$(jq .partitions_tiered <<<"$OUT")" "late rows: one partition tiered again"
assert_eq attach "$(jq -r '.jobs[0].swap' <<<"$OUT")" "late rows swapped in with ATTACH FROM + DETACH PART"
assert_eq "$want" "$(chq "$U1" "SELECT count(), sum(value) FROM events WHERE _partition_id = '$PID'")" "late rows: nothing lost"
assert_eq 251500 "$(chq "$U1" "SELECT count() FROM events WHERE _partition_id = '$PID'")" "late rows counted once"
assert_eq "$fp_cold" "$(tier_fp "$U1" "_part = '$cold_before'")" "the old cold part is intact"
assert_eq "cold" "$(chq "$U1" "SELECT groupUniqArray(disk_name)[1] FROM system.parts WHERE active AND table = 'events' AND partition_id = '$PID'")" "every part of the day cold"
[ "$(find "$L/blobs" -type f | wc -l)" -gt "$total" ] || fail "late rows: no objects added"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "late rows: catalog records the new part's objects"
assert_eq 0 "$(curl -sS "$U1/ferry/status" | jq .refused_deletes)" "late rows: no delete attempt"
tier_leftovers "$L" node1
tier_merges_on "$U1" "$(chq "$U1" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'default' LIMIT 1")"
ok "late rows tiered on their own: old cold part intact, nothing lost or doubled, merges running"

# ---- one partition on both nodes (a slice kept on two servers) -------------------------------
# The same partition id on two servers holds different parts under the same names (part names
# are unique per server only); each server's objects must be recorded, not just the first one's.
chq "$U1" "INSERT INTO events SELECT 99, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), number, number FROM numbers(3000)" >/dev/null
B1=$(chq "$U1" "SELECT max(max_block_number) FROM system.parts WHERE table = 'events'")
# block numbers count per table: bring node2's counter to node1's with small hot inserts
for _ in $(seq 1 200); do
    [ "$(chq "$U2" "SELECT max(max_block_number) FROM system.parts WHERE table = 'events'")" -lt $((B1 - 1)) ] || break
    chq "$U2" "INSERT INTO events SELECT 98, toYYYYMMDD($TODAY), 0, now(), 1, 1" >/dev/null
done
chq "$U2" "INSERT INTO events SELECT 99, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), number, 7 * number FROM numbers(2000)" >/dev/null
P99=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '99-%'")
assert_eq "$(chq "$U1" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P99'")" \
    "$(chq "$U2" "SELECT name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$P99'")" "same part name on both nodes"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
assert_eq 2 "$(jq .partitions_tiered <<<"$OUT")" "the shared partition tiered on both nodes"
assert_eq "$(tier_local_keys "$L")" "$(tier_catalog_keys "$C")" "both nodes' objects recorded"
E=$("$FERRY_BIN" catalog export --config "$C")
assert_eq "node1,node2" "$(jq -r --arg p "$P99" '[.parts[] | select(.partition_id == $p) | .servers | if type == "array" then .[] else split(",")[] end] | unique | join(",")' <<<"$E")" "the part record names both servers"
assert_eq 5000 "$(jq --arg p "$P99" '[.parts[] | select(.partition_id == $p) | .rows] | add' <<<"$E")" "rows of both nodes' parts recorded"
ok "one partition on two nodes: each node's objects and rows recorded"

# ---- the coordinator's scheduled tiering ------------------------------------------------------
sed -i 's/^\[cluster\]$/[cluster]\ntier_interval = 1s/' "$C"
chq "$U2" "INSERT INTO events SELECT 7, toYYYYMMDD($TODAY - 7), 0, toDateTime($TODAY - 7), 3, number FROM numbers(77)" >/dev/null
want=$(chq "$U2" "SELECT count(), sum(value) FROM events")
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$C" --port-file "$T/coord.port"
# tiered: the hot part is gone (the swap ran) and the run that swapped it has finished, cleanup
# included; the swap alone is not enough, since the coordinator stopped between the swap and the
# cleanup leaves the wave's freeze for its next run (and the check below would see it)
tiered() {
    [ "$(chq "$U2" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND disk_name = 'default' AND $pday = toYYYYMMDD($TODAY - 7)")" = 0 ] &&
        grep -q 'msg="scheduled tiering" partitions_tiered=[1-9]' "$T/coord.log"
}
wait_for 60 tiered || fail "the coordinator did not tier the late rows: $(tail -5 "$T/coord.log")"
kill -TERM "$BG_PID"; wait "$BG_PID" 2>/dev/null || true
grep -q 'msg="scheduled tiering"' "$T/coord.log" || fail "no scheduled tiering in the log"
assert_eq "$want" "$(chq "$U2" "SELECT count(), sum(value) FROM events")" "scheduled: nothing lost"
tier_leftovers "$L" node2
ok "ferry coordinator with tier_interval = 1s tiers late rows by itself"

done_testing
