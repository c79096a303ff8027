# Strictly read-only object storage for ClickHouse ([cluster] clickhouse_object_access =
# read-only, issue 23): a 3-node s3 lab behind the enforcing S3 proxy, whose clickhouse role may
# only GET, HEAD and LIST (--role clickhouse=GET,HEAD,LIST). The blog's tenant (8 days, 5 of them
# old enough) is tiered on node1, moved to node2 and cloned to a second replica; every load of a
# staging table goes through its load table: DETACH TABLE, place-parts, ATTACH TABLE, MOVE
# PARTITION into staging. Afterwards every row is exact on
# every replica, and the proxy counted no PUT, POST or DELETE request by the clickhouse role (and
# no refused one: ClickHouse never even tried). ferry doctor reports the mode and proves the
# credential cannot write; given a credential that can, it fails and leaves no object behind.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/agent.sh"

# the blog's days are 2026-11-01..08; with the clock at 11-09 00:00 UTC, 3d makes 01..05 due
export FERRY_TEST_NOW=$(date -u -d 2026-11-09T00:00:00Z +%s)
BUCKET=ferryro
s3policy_start "$T" "$BUCKET" --role clickhouse=GET,HEAD,LIST || fail "policy proxy did not start"
L=$T/lab
lab_up "$L" --nodes 3 "${S3P_ARGS[@]}"
mv_conf "$L"
C=$L/mv.conf
sed -i 's/^clickhouse_version = /clickhouse_object_access = read-only\nclickhouse_version = /' "$C"
grep -q '^clickhouse_object_access = read-only$' "$C" || fail "no clickhouse_object_access line in $C"
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" "$n"); chq "${U[$n]}" "$MV_DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
mv_ingest "${U[node1]}" blog 0 8 50000
mv_ingest "${U[node1]}" news 0 4 10000 5
before=$(mv_fp "${U[node1]}" blog 0)
news_before=$(mv_fp "${U[node1]}" news 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"
ok "lab: 3 nodes on s3 through the policy proxy (clickhouse role: GET HEAD LIST), blog 400k rows over 8 days and news 40k over 4 on node1"

# ---- tier, move, clone ------------------------------------------------------------------
"$FERRY_BIN" tier --config "$C" --older-than 3d --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier failed: $(tail -5 "$T/tier.err")"
assert_eq 9 "$(jq .partitions_tiered "$T/tier.json")" "9 partitions tiered (blog 5, news 4)"
grep -q 'staging loaded by re-attaching the load table' "$T/tier.err" || fail "tiering did not take the read-only route: $(tail -5 "$T/tier.err")"
assert_eq 5 "$(chq "${U[node1]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' AND partition LIKE '%blog%'")" "5 cold partitions on node1"
assert_eq "$before" "$(mv_fp "${U[node1]}" blog 0)" "node1: every row exact after tiering"
ok "tiered: 9 days on the cold disk through DETACH TABLE / place-parts / ATTACH TABLE, rows exact"

# two moves into node2 side by side: their loads of node2's one staging table take turns (lease)
"$FERRY_BIN" move --config "$C" --tenant news --split 0 --to node2 --grace 300 --json >"$T/move2.json" 2>"$T/move2.err" &
M2=$!
"$FERRY_BIN" move --config "$C" --tenant blog --split 0 --to node2 --grace 300 --json >"$T/move.json" 2>"$T/move.err" ||
    fail "move failed: $(tail -5 "$T/move.err")"
wait "$M2" || fail "the second move failed: $(tail -5 "$T/move2.err")"
assert_eq DONE "$(jq -r 'select(.event == "move") | .state' "$T/move.json")" "move done"
assert_eq DONE "$(jq -r 'select(.event == "move") | .state' "$T/move2.json")" "the second move done"
echo "# loads that waited for the other move's: $(cat "$T/move.err" "$T/move2.err" | grep -c "waiting for another flow's load" || true)"
assert_eq "$news_before" "$(mv_fp "${U[node2]}" news 0)" "node2: every row of news exact after its move"
assert_eq 0 "$(chq "${U[node2]}" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table IN ('events_ferry_staging', 'events_ferry_staging_load')")" "node2's staging and load tables hold nothing after both moves"
grep -q 'staging loaded by re-attaching the load table' "$T/move.err" || fail "the move did not take the read-only route"
assert_eq "$before" "$(mv_fp "${U[node2]}" blog 0)" "node2: every row exact after the move"
assert_eq 0 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = 'blog'")" "node1 holds nothing of blog"
assert_eq 5 "$(chq "${U[node2]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' AND partition LIKE '%blog%'")" "5 cold partitions served on node2"
ok "moved blog and news node1 -> node2 side by side: cold days as pointer folders, rows exact, sources empty, staging empty"

"$FERRY_BIN" tenant set-rf blog 2 --config "$C" >/dev/null || fail "set-rf failed"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb.json" 2>"$T/rb.err" || fail "rebalance failed: $(tail -5 "$T/rb.err")"
assert_eq '["DONE"]' "$(jq -sc '[.[] | select(.event == "move") | .state] | unique' "$T/rb.json")" "every step of the rebalance done"
SH=$("$FERRY_BIN" route --config "$C" --tenant blog --json | jq -r '.slices[0].shards | join(" ")')
assert_eq 2 "$(wc -w <<<"$SH")" "blog routed to 2 replicas ($SH)"
grep -q 'staging loaded by re-attaching the load table' "$T/rb.err" || fail "the clone did not take the read-only route"
for n in $SH; do
    assert_eq "$before" "$(mv_fp "${U[$n]}" blog 0)" "$n: every row exact (read back)"
    assert_eq 5 "$(chq "${U[$n]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' AND partition LIKE '%blog%'")" "$n serves 5 cold partitions"
done
"$FERRY_BIN" repair --config "$C" --json >"$T/repair.json" 2>"$T/repair.err" || fail "repair failed: $(tail -3 "$T/repair.err")"
mv_no_residue "$L"
ok "cloned: both replicas ($SH) read back every row exactly; repair finds them in sync; no residue"

# ---- what the clickhouse role sent --------------------------------------------------------
M=$(s3policy_methods clickhouse)
echo "# clickhouse role's requests by method: $M"
for m in PUT POST DELETE; do
    assert_eq 0 "$(s3policy_counts | jq --arg m "$m" '.methods.clickhouse[$m] // 0')" "clickhouse role: no $m request"
done
assert_eq 0 "$(s3policy_counts | jq '[.counts.clickhouse // {} | .[] | .denied] | add // 0')" "clickhouse role: no request refused"
[ "$(s3policy_counts | jq '.methods.clickhouse.GET // 0')" -gt 0 ] || fail "ClickHouse read nothing from the store? ($M)"
[ "$(s3policy_counts | jq '.methods.uploader.PUT // 0')" -gt 0 ] || fail "the uploader uploaded nothing?"
ok "the clickhouse role sent only reads ($M): no PUT, POST or DELETE"

# ---- doctor ----------------------------------------------------------------------------------
expect_exit 0 "$FERRY_BIN" doctor --json --skip shard_grants --config "$C"
A=$(jq -c '[.checks[] | select(.check == "object_access")]' <<<"$OUT")
assert_contains "$(jq -r '.[0].message' <<<"$A")" "clickhouse_object_access = read-only" "doctor reports the mode"
assert_contains "$(jq -r '.[] | select(.status == "pass") | .message' <<<"$A")" "refused a PUT by the clickhouse credential" "doctor: the credential cannot write"
assert_eq 0 "$(jq '[.[] | select(.status != "pass")] | length' <<<"$A")" "object_access: every finding passes"
# a clickhouse credential that can write (the uploader's key): doctor fails, and leaves nothing
sed -e "/^\[credentials \"clickhouse\"\]/,/^\[/{s|^access_key_id = .*|access_key_id = $(cat "$T/keys/uploader.id")|;s|^secret_access_key_file = .*|secret_access_key_file = $T/keys/uploader.secret|}" "$C" >"$T/bad.conf"
expect_exit 1 "$FERRY_BIN" doctor --skip shard_grants,delete_refused --config "$T/bad.conf"
assert_contains "$OUT" "CREATED the probe object" "doctor fails a credential that can write"
assert_contains "$OUT" "deleted again by the janitor" "the probe object is deleted"
left=$(find "$T/s3/data/$BUCKET" -path '*ferry-doctor*' -type f 2>/dev/null | grep -v '\._S3rver_' || true)
[ -z "$left" ] || fail "doctor left objects behind: $left"
sed "/^clickhouse_object_access/d" "$C" >"$T/rc.conf"
expect_exit 0 "$FERRY_BIN" doctor --skip shard_grants --config "$T/rc.conf" --json
assert_contains "$(jq -r '.checks[] | select(.check == "object_access") | .message' <<<"$OUT")" "read-create" "doctor reports the default mode"
ok "doctor: reports read-only, the store refuses the clickhouse credential's PUT; a writable credential fails it, probe removed"

# a ClickHouse write is refused: the proxy enforces the reduced role (the test can see a write)
out=$(curl -sS "${U[node1]}/" --data-binary "CREATE TABLE probe (x UInt64) ENGINE = MergeTree ORDER BY x SETTINGS storage_policy = 'tiered'; " 2>&1; \
      curl -sS "${U[node1]}/" --data-binary "INSERT INTO probe SELECT number FROM numbers(1000)"; \
      curl -sS "${U[node1]}/" --data-binary "ALTER TABLE probe MOVE PARTITION tuple() TO DISK 'cold'")
assert_contains "$out" "Access Denied" "ClickHouse's own write to the cold disk is refused by the store"
denied0=$(s3policy_n clickhouse PUT denied)
[ "$denied0" -gt 0 ] || fail "the refused write was not counted"
ok "the proxy refuses ClickHouse's own write to the cold disk (MOVE PARTITION TO DISK): the test sees a write"


# ---- place-parts refuses what is not its job ---------------------------------------------------
A2=${U[node2]}; TOK2=$(cat "$L/node2/agent.token")
SP=$(chq "$A2" "SELECT arrayStringConcat(arrayMap(p -> concat('\"', p, '\"'), data_paths), ',') FROM system.tables WHERE name = 'events_ferry_staging'")
agent_expect 409 "is attached" "$A2" "$TOK2" place-parts "{\"database\":\"default\",\"table\":\"events_ferry_staging\",\"data_paths\":[$SP],\"parts\":[{\"disk\":\"cold\",\"name\":\"x_1_1_0\",\"to\":\"x_2_2_0\"}]}"
chq "$A2" "DETACH TABLE events_ferry_staging" >/dev/null
agent_expect 400 "part names of one partition" "$A2" "$TOK2" place-parts "{\"database\":\"default\",\"table\":\"events_ferry_staging\",\"data_paths\":[$SP],\"parts\":[{\"disk\":\"cold\",\"name\":\"x_1_1_0\",\"to\":\"y_2_2_0\"}]}"
agent_expect 400 "" "$A2" "$TOK2" place-parts "{\"database\":\"default\",\"table\":\"events_ferry_staging\",\"data_paths\":[\"/etc/\"],\"parts\":[{\"disk\":\"cold\",\"name\":\"x_1_1_0\",\"to\":\"x_2_2_0\"}]}"
EP=$(chq "$A2" "SELECT arrayStringConcat(arrayMap(p -> concat('\"', p, '\"'), data_paths), ',') FROM system.tables WHERE name = 'events'")
agent_expect 409 "belongs to an attached table" "$A2" "$TOK2" place-parts "{\"database\":\"default\",\"table\":\"events_ferry_staging\",\"data_paths\":[$EP],\"parts\":[{\"disk\":\"cold\",\"name\":\"x_1_1_0\",\"to\":\"x_2_2_0\"}]}"
agent_expect 404 "detached/x_1_1_0" "$A2" "$TOK2" place-parts "{\"database\":\"default\",\"table\":\"events_ferry_staging\",\"data_paths\":[$SP],\"parts\":[{\"disk\":\"cold\",\"name\":\"x_1_1_0\",\"to\":\"x_2_2_0\"}]}"
chq "$A2" "ATTACH TABLE events_ferry_staging" >/dev/null
ok "place-parts refuses an attached table, a part renamed into another partition, a path outside the data directories, the directory of another (attached) table, a part not in detached/"

# ---- bad value ---------------------------------------------------------------------------------
sed 's/^clickhouse_object_access = read-only/clickhouse_object_access = readonly/' "$C" >"$T/typo.conf"
expect_exit 2 "$FERRY_BIN" tier --config "$T/typo.conf" --older-than 3d
assert_contains "$ERR" "clickhouse_object_access = 'readonly': expected read-create" "a bad value is named with its line"
ok "a misspelt mode is refused with FILE:LINE"
done_testing
