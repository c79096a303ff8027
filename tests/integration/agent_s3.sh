# The node agent in a 2-node lab whose cold disk is an S3 disk on s3rver: the tiering flow
# (freeze on node1, upload with the uploader role, pointer part into node2's staging, ATTACH,
# REPLACE PARTITION, same data), the objects equal to the frozen files byte for byte, and a DROP
# on node2 that leaves the shared objects alone (the pointers carry ref_count 1).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"

BUCKET=ferrylab
s3rver_start "$T/s3" "$BUCKET" || fail "s3rver did not start"
printf 'S3RVER\n' >"$T/ak"
printf 'S3RVER\n' >"$T/sk"
chmod 600 "$T/sk"
L=$T/lab
lab_up "$L" --nodes 2 --object-store s3 --s3-endpoint "$S3RVER_ENDPOINT" --s3-bucket "$BUCKET" \
    --s3-access-key-file "$T/ak" --s3-secret-key-file "$T/sk" --s3-prefix tier/
grep -q "<endpoint>$S3RVER_ENDPOINT/$BUCKET/tier/</endpoint>" "$L/node1/data/config.xml" ||
    fail "the cold disk's endpoint lacks the bucket path"
grep -q "<region>us-east-1</region>" "$L/node1/data/config.xml" || fail "no region for the s3 disk"
grep -q '^\[credentials "uploader"\]' "$L/ferry.conf" || fail "ferry.conf has no uploader role"
grep -q "S3RVER" "$L/node1/data/config.xml" || fail "no key in the disk config"
ok "s3 lab: endpoint with bucket path, region, roles"

# ClickHouse itself writes to the bucket: a partition moved to the cold disk lands under tier/
U1=$(lab_url "$L" node1)
chq "$U1" "CREATE TABLE probe (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
chq "$U1" "INSERT INTO probe SELECT number FROM numbers(1000)" >/dev/null
chq "$U1" "ALTER TABLE probe MOVE PARTITION tuple() TO DISK 'cold'" >/dev/null
assert_eq 499500 "$(chq "$U1" 'SELECT sum(x) FROM probe')" "probe read back from s3"
ls "$T/s3/data/$BUCKET/tier" >/dev/null 2>&1 || fail "ClickHouse wrote nothing under $BUCKET/tier/"
ok "ClickHouse's s3 disk writes to and reads from s3rver"

# s3rver does not check signatures: read the objects back with plain GETs
check_s3() { curl -sS --max-time 30 -o "$T/obj" "$S3RVER_ENDPOINT/$BUCKET/$1" && cmp -s "$T/obj" "$2"; }
agent_tier_flow "$L" check_s3

# DROP the partition on node2: the pointers carry ref_count 1, so ClickHouse never deletes the
# objects node1's part files were uploaded to (ferry's janitor owns them).
chq "$AU2" "ALTER TABLE staging DETACH PARTITION ID '1-20261101'" >/dev/null
agent_ok "$AU2" "$AT2" remove-detached "{\"database\":\"default\",\"table\":\"staging\",\"part\":\"$(chq "$AU2" "SELECT name FROM system.detached_parts WHERE table = 'staging' LIMIT 1")\"}"
assert_eq true "$(jq -r .existed <<<"$AG_BODY")" "staging's detached part removed"
chq "$AU2" "ALTER TABLE e DROP PARTITION ID '1-20261101'" >/dev/null
chq "$AU2" "SYSTEM WAIT BLOBS CLEANUP 'cold'" >/dev/null 2>&1 || sleep 3
for key in $(jq -r '.[].key' <<<"$FLOW_OBJECTS"); do
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$S3RVER_ENDPOINT/$BUCKET/$key")
    assert_eq 200 "$code" "object $key still in the bucket after DROP on node2"
done
assert_eq 0 "$(chq "$AU2" "SELECT count() FROM e WHERE t = 1")" "dropped on node2"
# The control: a part ClickHouse wrote itself (ref_count 0) does lose its objects on DROP here.
own() { find "$T/s3/data/$BUCKET/tier" -name '*._S3rver_object' | grep -vc "/tier/default/"; }
before=$(own)
chq "$U1" "DROP TABLE probe SYNC" >/dev/null
chq "$U1" "SYSTEM WAIT BLOBS CLEANUP 'cold'" >/dev/null 2>&1 || sleep 3
[ "$(own)" -lt "$before" ] || fail "control: DROP of ClickHouse's own part deleted nothing ($before objects)"
ok "DROP PARTITION on node2 leaves the shared objects in the bucket"

done_testing
