# A whole lab run against an S3 store that enforces a policy per credential (s3rver behind
# tests/lib/s3_policy_proxy.py: botocore checks every signature; clickhouse may read, create and
# list, uploader only create, janitor delete/list/head). The lab gives each role its own key.
#  - ferry doctor passes (canary refused for clickhouse and uploader, deleted by the janitor;
#    versioning reported unsupported by s3rver; versions; no unmanaged cold table), then fails
#    with a fix for a table the catalog does not manage
#  - the blog's failure cases: a failed ATTACH of a pointer part whose last file is broken, and a
#    DROP PARTITION on cold data issued straight to ClickHouse on node1 while node2 reads the
#    same objects: ClickHouse's deletes are refused by the store and counted, node2 still reads
#    every row, no object is lost
#  - retention deletes with the janitor; the sweep with the store down is incomplete and deletes
#    nothing
#  - over the whole run, the clickhouse credential made no delete that succeeded
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"
source "$FERRY_SOURCE_DIR/tests/lib/retention.sh"

BUCKET=ferrylab
s3policy_start "$T" "$BUCKET" || fail "policy proxy did not start"
L=$T/lab
lab_up "$L" --nodes 2 "${S3P_ARGS[@]}"
grep -q "access_key_id = FERRYJANITORKEY" "$L/ferry.conf" || fail "the janitor has no key of its own"
grep -q "FERRYCLICKHOUSEKEY" "$L/node1/data/config.xml" || fail "the cold disk does not use the clickhouse key"
grep -q "FERRYJANITORKEY\|FERRYUPLOADERKEY" "$L/node1/data/config.xml" && fail "ClickHouse got another role's key"
rt_init "$L" 3 acme
C=$L/ferry.conf
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
OLD=$(rt_day 10)
ok "s3 lab through the policy proxy, one key per role"

# ---- doctor -------------------------------------------------------------------------------------
for u in "$U1" "$U2"; do chq "$u" "CREATE TABLE e $RT_DDL" >/dev/null; done
# shard_grants is left out: the lab's nodes run every query as one all-powerful user, with no
# access control for it to find (router_auth.sh checks what it reports there)
expect_exit 0 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
D=$OUT
assert_eq pass "$(jq -r '.checks[] | select(.check == "delete_refused") | .status' <<<"$D")" "canary"
assert_eq unsupported "$(jq -r '.checks[] | select(.check == "versioning") | .status' <<<"$D")" "versioning on s3rver"
assert_contains "$(jq -r '.checks[] | select(.check == "versioning") | .message' <<<"$D")" "unknown" "said plainly"
assert_eq "pass pass" "$(jq -r '[.checks[] | select(.check == "clickhouse_version") | .status] | join(" ")' <<<"$D")" "versions"
assert_eq 1 "$(s3policy_n clickhouse DELETE denied)" "canary delete by clickhouse refused by the store"
assert_eq 1 "$(s3policy_n uploader DELETE denied)" "canary delete by uploader refused by the store"
assert_eq 1 "$(s3policy_n janitor DELETE allowed)" "canary deleted by the janitor"
chq "$U2" "CREATE TABLE stray (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'" >/dev/null
expect_exit 1 "$FERRY_BIN" doctor --skip shard_grants --config "$C"
assert_contains "$OUT" "default.stray" "doctor names the unmanaged table"
assert_contains "$OUT" "fix:" "with a fix"
chq "$U2" "DROP TABLE stray SYNC" >/dev/null
ok "doctor: canary refused for clickhouse and uploader by the store, versioning 'unsupported', unmanaged table found"

# ---- shared cold data ---------------------------------------------------------------------------
chq "$U1" "INSERT INTO e SELECT 'acme', $OLD, 0, number, toString(number % 100) FROM numbers(50000)" >/dev/null
PA=$(chq "$U1" "SELECT DISTINCT partition_id FROM system.parts WHERE table = 'e'")
chq "$U1" "ALTER TABLE e MOVE PARTITION ID '$PA' TO DISK 'cold'" >/dev/null
rt_cold_share "$L" node1 node2 "$PA"
WANT=$(chq "$U1" "SELECT count(), sum(x), uniqExact(v) FROM e")
assert_eq "$WANT" "$(chq "$U2" "SELECT count(), sum(x), uniqExact(v) FROM e")" "node2 reads node1's objects"
KEYS2=$(rt_pointer_keys "$L" node2)

# ---- blog case 1: a failed ATTACH of a pointer part whose last file is broken --------------------
chq "$U2" "CREATE TABLE staging $RT_DDL" >/dev/null
rt_agent "$L" node1 freeze "{\"database\":\"default\",\"table\":\"e\",\"partition_id\":\"$PA\",\"name\":\"bad\"}"
P1=$(jq -r '.parts[0].name' <<<"$AG_BODY")
rt_agent "$L" node1 send "{\"database\":\"default\",\"table\":\"e\",\"freeze\":\"bad\",\"part\":\"$P1\",\"target\":{\"url\":\"$U2\",\"token\":\"$(cat "$L/node2/agent.token")\",\"database\":\"default\",\"table\":\"staging\"}}"
PP=$(jq -r .target.path <<<"$AG_BODY")
rt_agent "$L" node1 remove-freeze '{"name":"bad"}'
LAST=$(ls "$PP" | sort | tail -1)
# the last file now names an object that does not exist (sizes kept consistent)
sed -i "3s#\t.*#\ttier/zzz/doesnotexist#" "$PP/$LAST"
before=$(s3policy_n clickhouse DELETE denied)
code=$(curl -sS -o "$T/attach.out" -w '%{http_code}' "$U2/" --data-binary "ALTER TABLE staging ATTACH PARTITION ID '$PA'")
[ "$code" != 200 ] || [ "$(chq "$U2" "SELECT count() FROM staging")" = 0 ] ||
    fail "the broken part was attached ($(cat "$T/attach.out"))"
sleep 2
chq "$U2" "SYSTEM WAIT BLOBS CLEANUP 'cold'" >/dev/null 2>&1 || true
ATTACH_REFUSED=$(( $(s3policy_n clickhouse DELETE denied) - before ))
assert_eq "$WANT" "$(chq "$U2" "SELECT count(), sum(x), uniqExact(v) FROM e")" "node2 still reads after the failed ATTACH"
assert_eq "$WANT" "$(chq "$U1" "SELECT count(), sum(x), uniqExact(v) FROM e")" "node1 still reads after the failed ATTACH"
ok "failed ATTACH (HTTP $code): $ATTACH_REFUSED delete requests by ClickHouse refused; both servers read every row"
for p in $(chq "$U2" "SELECT name FROM system.detached_parts WHERE table = 'staging'"); do
    rt_agent "$L" node2 remove-detached "{\"database\":\"default\",\"table\":\"staging\",\"part\":\"$p\"}"
done

# ---- blog case 2: DROP PARTITION on cold data, straight to ClickHouse, on node1 -------------------
before=$(s3policy_n clickhouse DELETE denied)
chq "$U1" "ALTER TABLE e DROP PARTITION ID '$PA'" >/dev/null
for _ in $(seq 1 30); do
    [ "$(s3policy_n clickhouse DELETE denied)" -gt "$before" ] && break
    sleep 0.2
done
sleep 2
DROP_REFUSED=$(( $(s3policy_n clickhouse DELETE denied) - before ))
[ "$DROP_REFUSED" -gt 0 ] || fail "ClickHouse tried no delete after DROP PARTITION (expected refused attempts)"
assert_eq "$WANT" "$(chq "$U2" "SELECT count(), sum(x), uniqExact(v) FROM e")" "node2 still reads every row after node1's DROP"
for k in $KEYS2; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$S3RVER_ENDPOINT/$BUCKET/$k")
    assert_eq 200 "$code" "object $k still in the bucket"
done
ok "DROP PARTITION on node1: $DROP_REFUSED delete requests by ClickHouse refused (its retry loop); node2 reads every row"

# ---- the sweep with the store down: incomplete, nothing deleted ---------------------------------
curl -sS -X PUT --data-binary orphan "$S3RVER_ENDPOINT/$BUCKET/tier/zzz/orphan" >/dev/null
jdel=$(s3policy_n janitor DELETE allowed)
s3rver_stop
expect_exit 1 "$FERRY_BIN" sweep --json --delete-orphans --min-age 1s --config "$C"
assert_eq false "$(jq -r .complete <<<"$OUT")" "store down: incomplete"
assert_eq 0 "$(jq -r .deleted <<<"$OUT")" "nothing deleted"
assert_eq "$jdel" "$(s3policy_n janitor DELETE allowed)" "no delete request reached the store"
bg_start "$T/s3/s3rver2.log" node --openssl-legacy-provider "$S3RVER_JS" -d "$T/s3/data" \
    -a 127.0.0.1 -p "$S3RVER_PORT" --service-endpoint localhost --configure-bucket "$BUCKET"
S3RVER_PID=$BG_PID
wait_for 30 grep -q listening "$T/s3/s3rver2.log" || fail "s3rver did not restart"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' "$S3RVER_ENDPOINT/$BUCKET/tier/zzz/orphan")" "orphan still there"
ok "object store down during the sweep: report incomplete, no delete request"

# ---- retention on S3: node2's copy goes, the janitor deletes, ClickHouse never does --------------
sleep 2
expect_exit 0 "$FERRY_BIN" retention --keep 5d --json --config "$C"
assert_eq DONE "$(jq -r '.jobs[0].state' <<<"$OUT")" "retention done"
RDEL=$(jq -r '.jobs[0].deleted' <<<"$OUT")
[ "$RDEL" -gt 0 ] || fail "retention deleted nothing"
assert_eq 0 "$(chq "$U2" "SELECT count() FROM e")" "partition gone from node2"
for k in $KEYS2; do
    assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' "$S3RVER_ENDPOINT/$BUCKET/$k")" "object $k deleted by retention"
done
ok "retention: $RDEL objects deleted by the janitor once no server referenced them"

# ---- the whole run, per credential ------------------------------------------------------------------
s3policy_counts >"$T/counts.json"
assert_eq 0 "$(s3policy_n clickhouse DELETE allowed)" "no delete by the clickhouse credential succeeded"
assert_eq 0 "$(s3policy_n clickhouse DELETE failed)" "none even reached the store"
assert_eq 0 "$(s3policy_n uploader DELETE allowed)" "no delete by the uploader"
[ "$(s3policy_n janitor DELETE allowed)" -ge $((RDEL + 1)) ] || fail "janitor deletes not counted"
echo "# delete requests per credential: $(jq -c '.counts | map_values(.DELETE // {})' "$T/counts.json")"
ok "whole run: clickhouse DELETE allowed=0 denied=$(s3policy_n clickhouse DELETE denied); janitor allowed=$(s3policy_n janitor DELETE allowed)"

done_testing
