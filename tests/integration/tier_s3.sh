# Tiering in the blog's lab with the S3 object store (s3rver), 2 nodes: one tenant with 2 million
# rows over 8 days on node1 and a small one on node2; 5 days tiered on each. Data unchanged, no
# object deleted (bucket listings before and after), ferry's objects byte for byte the frozen
# files and exactly what the catalog records. Then the store goes away: tiering late rows fails
# with a clear error, the partition stays hot and intact, nothing is left behind; with the store
# back the next run tiers it.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

BUCKET=ferrytier
s3rver_start "$T/s3" "$BUCKET" || fail "s3rver did not start"
printf 'S3RVER\n' >"$T/ak"; printf 'S3RVER\n' >"$T/sk"; chmod 600 "$T/sk"
L=$T/lab
tier_lab "$L" --nodes 2 --object-store s3 --s3-endpoint "$S3RVER_ENDPOINT" --s3-bucket "$BUCKET" \
    --s3-access-key-file "$T/ak" --s3-secret-key-file "$T/sk" --s3-prefix tier/
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
tier_create "$U1"; tier_create "$U2"
tier_fill "$U1" 42 2000000 8
tier_fill "$U2" 7 50000 8
for u in "$U1" "$U2"; do chq "$u" "OPTIMIZE TABLE events FINAL" >/dev/null; done
pday="toUInt32(splitByChar('-', partition_id)[2])"
pold="$pday <= toYYYYMMDD($TODAY - 4)"
B1=$(tier_fp "$U1"); B2=$(tier_fp "$U2")
tier_copy_frozen "$L" node1 "$pold" "$T/frozen"
nfiles=$(find "$T/frozen" -type f | wc -l)
K0=$(tier_s3_keys "$T/s3" "$BUCKET")

expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --json
R=$OUT
assert_eq 10 "$(jq .partitions_tiered <<<"$R")" "partitions tiered"
assert_eq "$B1" "$(tier_fp "$U1")" "node1: data per partition unchanged"
assert_eq "$B2" "$(tier_fp "$U2")" "node2: data per partition unchanged"
for u in "$U1" "$U2"; do
    assert_eq "cold	5" "$(chq "$u" "SELECT disk_name, uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND $pold GROUP BY disk_name")" "old days cold"
done
ok "s3: 10 partitions tiered on 2 nodes in $(jq .wall_ms <<<"$R" | cut -d. -f1) ms (steps: $(jq -c .step_ms <<<"$R")); rows, sums, distinct counts unchanged"

K1=$(tier_s3_keys "$T/s3" "$BUCKET")
[ -z "$(comm -23 <(echo "$K0") <(echo "$K1"))" ] || fail "objects disappeared: $(comm -23 <(echo "$K0") <(echo "$K1") | head)"
assert_eq "$nfiles" "$(grep -c '^tier/default/events/42-' <<<"$K1")" "node1's objects = files of its frozen parts"
tier_match_frozen "$T/frozen" "$T/s3/data/$BUCKET/tier/default/events" ._S3rver_object
assert_eq "$(grep '^tier/default/' <<<"$K1")" "$(tier_catalog_keys "$C")" "bucket = catalog records"
for n in node1 node2; do tier_leftovers "$L" $n; done
ok "s3: no object deleted, objects byte for byte the frozen files and the catalog's, no leftovers"

# ---- the store goes away -------------------------------------------------------------------
PID=$(chq "$U1" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND $pday = toYYYYMMDD($TODAY - 6) LIMIT 1")
chq "$U1" "INSERT INTO events SELECT 42, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), 9, 7000000 + number FROM numbers(300)" >/dev/null
want=$(tier_fp "$U1" "_partition_id = '$PID'")
parts_before=$(chq "$U1" "SELECT name, disk_name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$PID' ORDER BY name")
s3port=$S3RVER_PORT
s3rver_stop
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --server node1
assert_contains "$ERR" "upload" "the failing step is named"
assert_contains "$ERR" "$s3port" "the unreachable store is named"
assert_eq "$parts_before" "$(chq "$U1" "SELECT name, disk_name FROM system.parts WHERE active AND table = 'events' AND partition_id = '$PID' ORDER BY name")" "the partition's parts unchanged, the late part still hot"
J=$("$FERRY_BIN" catalog export --config "$C" | jq -c --arg id "tier.node1.events.$PID" '.jobs[] | select(.id == $id)')
assert_eq FAILED "$(jq -r .state <<<"$J")" "job failed"
assert_contains "$(jq -r .detail <<<"$J")" "upload" "job detail says why"
tier_leftovers "$L" node1
tier_merges_on "$U1" "$(chq "$U1" "SELECT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'default' AND partition_id != '$PID' LIMIT 1")"
ok "store unreachable: clear error, partition hot and intact, rolled back (no shadow, staging or merge stop left)"

tier_s3rver_restart "$T/s3" "$BUCKET" "$s3port"
assert_eq "$want" "$(tier_fp "$U1" "_partition_id = '$PID'")" "data intact after the failure"
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --server node1 --json
assert_eq 1 "$(jq .partitions_tiered <<<"$OUT")" "the failed partition tiered on the next run"
assert_eq "$want" "$(tier_fp "$U1" "_partition_id = '$PID'")" "late rows kept"
K2=$(tier_s3_keys "$T/s3" "$BUCKET")
[ -z "$(comm -23 <(echo "$K1") <(echo "$K2"))" ] || fail "objects disappeared after the late rows"
assert_eq "$(grep '^tier/default/' <<<"$K2")" "$(tier_catalog_keys "$C")" "bucket = catalog records after the retry"
tier_leftovers "$L" node1
ok "store back: the next run tiers the late rows, nothing lost, every object accounted for"

done_testing
