# Which ClickHouse statements write to the object store (issue 23, `clickhouse_object_access =
# read-only`): a 1-node s3 lab behind the enforcing S3 proxy (tests/lib/s3_policy_proxy.py counts
# every request per role), cold partitions made by ClickHouse itself, then each partition or
# table statement a ferry flow uses, one at a time, with the clickhouse role's PUT, DELETE and
# ABORT requests counted around it (deletes are asynchronous since 26.2: SYSTEM WAIT BLOBS
# CLEANUP first). The counts are printed as a table (docs/object-store.md records them for the
# pinned ClickHouse version) and checked against what the docs say, so a new version that
# behaves differently fails here first.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3rver.sh"
source "$FERRY_SOURCE_DIR/tests/lib/s3policy.sh"

BUCKET=ferryprobe
s3policy_start "$T" "$BUCKET" || fail "policy proxy did not start"
L=$T/lab
lab_up "$L" --nodes 1 "${S3P_ARGS[@]}"
U=$(lab_url "$L" node1)
VERSION=$(chq "$U" "SELECT version()")
DDL="(p UInt32, x UInt64, v String) ENGINE = MergeTree PARTITION BY p ORDER BY x SETTINGS storage_policy = 'tiered'"
for t in e s m r; do chq "$U" "CREATE TABLE $t $DDL" >/dev/null; done
for p in 1 2; do
    for b in 0 1; do chq "$U" "INSERT INTO e SELECT $p, number + $b * 100000, toString(number % 7) FROM numbers(20000)" >/dev/null; done
    chq "$U" "ALTER TABLE e MOVE PARTITION ID '$p' TO DISK 'cold'" >/dev/null
done
chq "$U" "SYSTEM STOP MERGES e" >/dev/null
assert_eq "4 4" "$(chq "$U" "SELECT count() || ' ' || countIf(disk_name = 'cold') FROM system.parts WHERE active AND table = 'e'")" "4 cold parts"
ok "ClickHouse $VERSION: 2 cold partitions of 2 parts each"

writes() { # PUT DELETE ABORT of the clickhouse role, every outcome
    s3policy_counts | jq -r '[.counts.clickhouse // {} | (.PUT, .DELETE, .ABORT) | (. // {}) | ((.allowed // 0) + (.denied // 0) + (.failed // 0))] | join(" ")'
}
settle() { chq "$U" "SYSTEM WAIT BLOBS CLEANUP 'cold'" >/dev/null 2>&1 || sleep 2; }
declare -A GOT
probe() { # NAME SQL...
    local name=$1; shift
    settle
    local before after
    before=$(writes)
    for q in "$@"; do chq "$U" "$q" >/dev/null; done
    settle
    after=$(writes)
    read -r p0 d0 a0 <<<"$before"; read -r p1 d1 a1 <<<"$after"
    GOT[$name]="$((p1 - p0)) $((d1 - d0)) $((a1 - a0))"
    printf '# %-58s PUT %3d  DELETE %3d  ABORT %d\n' "$name" $((p1 - p0)) $((d1 - d0)) $((a1 - a0))
}
echo "# ClickHouse $VERSION, clickhouse role's requests per statement:"
probe "SELECT (read the cold partitions)" "SELECT count(), sum(x) FROM e"
probe "FREEZE PARTITION" "ALTER TABLE e FREEZE PARTITION ID '2' WITH NAME 'probe'"
probe "UNFREEZE" "ALTER TABLE e UNFREEZE PARTITION ID '2' WITH NAME 'probe'"
probe "ATTACH PARTITION FROM (clone into another table)" "ALTER TABLE s ATTACH PARTITION ID '1' FROM e"
probe "REPLACE PARTITION FROM" "ALTER TABLE r REPLACE PARTITION ID '1' FROM s"
probe "MOVE PARTITION TO TABLE" "ALTER TABLE s MOVE PARTITION ID '1' TO TABLE m"
probe "DETACH PARTITION" "ALTER TABLE m DETACH PARTITION ID '1'"
probe "ATTACH PARTITION (from detached/)" "ALTER TABLE m ATTACH PARTITION ID '1'"
probe "DETACH TABLE + ATTACH TABLE" "DETACH TABLE m" "ATTACH TABLE m"
probe "merge of cold parts (OPTIMIZE FINAL)" "SYSTEM START MERGES e" "OPTIMIZE TABLE e PARTITION ID '2' FINAL" "SYSTEM STOP MERGES e"
# the probe's own check that it sees writes: ClickHouse moving a hot partition to the cold disk
# writes the part's files as new objects of its own
chq "$U" "INSERT INTO e SELECT 3, number, toString(number % 7) FROM numbers(20000)" >/dev/null
probe "MOVE PARTITION TO DISK 'cold' (ClickHouse's own objects)" "ALTER TABLE e MOVE PARTITION ID '3' TO DISK 'cold'"
for t in e r m; do
    assert_eq 40000 "$(chq "$U" "SELECT count() FROM $t WHERE p = 1")" "table $t serves partition 1"
done
ok "every statement probed; rows intact"
# what docs/object-store.md records for the pinned version: the partition and table statements
# of ferry's flows write nothing; a merge of cold parts does (ClickHouse's own new objects)
for name in "SELECT (read the cold partitions)" "FREEZE PARTITION" "UNFREEZE" \
    "ATTACH PARTITION FROM (clone into another table)" "REPLACE PARTITION FROM" \
    "MOVE PARTITION TO TABLE" "DETACH PARTITION" "ATTACH PARTITION (from detached/)" \
    "DETACH TABLE + ATTACH TABLE"; do
    assert_eq "0 0 0" "${GOT[$name]}" "$name writes nothing to the store (ClickHouse $VERSION)"
done
read -r mp _ _ <<<"${GOT["MOVE PARTITION TO DISK 'cold' (ClickHouse's own objects)"]}"
[ "$mp" -gt 0 ] || fail "MOVE PARTITION TO DISK 'cold' wrote no object: the probe sees no writes at all?"
# the lab's cold volume is prefer_not_to_merge (docs/operations.md requires it): OPTIMIZE FINAL
# leaves the cold parts alone, so it writes nothing either
assert_eq "2" "$(chq "$U" "SELECT count() FROM system.parts WHERE active AND table = 'e' AND partition_id = '2'")" \
    "the cold partition's 2 parts were not merged (prefer_not_to_merge)"
assert_eq "0 0 0" "${GOT["merge of cold parts (OPTIMIZE FINAL)"]}" "OPTIMIZE FINAL on a prefer_not_to_merge cold volume writes nothing"
ok "ClickHouse $VERSION: ATTACH, REPLACE, MOVE PARTITION TO TABLE, DETACH, FREEZE write nothing; cold parts are not merged (prefer_not_to_merge); MOVE TO DISK writes $mp objects"
done_testing
