# With the hot disk full, ClickHouse must not write new parts to the cold (object storage) volume
# (the chaos soak: inserts and merges landed there, their metadata could not be written, the
# parts broke and ClickHouse tried to delete their objects, docs/reliability.md). The lab's policy
# has `max_data_part_size_bytes = 1` on the cold volume (docs/operations.md): the volume reserves
# no part, so an insert or a merge that finds the hot disk full fails instead, while ferry's own
# ways into the cold disk (ATTACH, REPLACE and MOVE PARTITION ... TO TABLE of pointer parts) and
# ClickHouse's MOVE PARTITION ... TO DISK, which reserve on the disk itself, still work.
# The hot disk is made full with keep_free_space_bytes (a config.d file: no root needed).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
tier_lab "$L" --nodes 1
C=$L/ferry.conf
U=$(lab_url "$L" node1)
tier_create "$U"
assert_eq 1 "$(chq "$U" "SELECT max_data_part_size FROM system.storage_policies WHERE policy_name = 'tiered' AND volume_name = 'cold'")" "the cold volume takes no new part"
# tenant 1: two old days to tier later; tenant 2: one day to move to the cold disk by hand;
# tenant 3: two hot parts of one day to merge
chq "$U" "INSERT INTO events SELECT 1, toYYYYMMDD($TODAY - 5 - number % 2), 0, toDateTime($TODAY - 5), number % 97, number FROM numbers(5000)" >/dev/null
chq "$U" "INSERT INTO events SELECT 2, toYYYYMMDD($TODAY - 6), 0, toDateTime($TODAY - 6), number % 97, number FROM numbers(3000)" >/dev/null
for b in 0 1; do
    chq "$U" "INSERT INTO events SELECT 3, toYYYYMMDD($TODAY), 0, now(), number % 97, number + $b * 1000 FROM numbers(1000)" >/dev/null
done
want1=$(tier_fp "$U" "tenant = 1")
want2=$(tier_fp "$U" "tenant = 2")
want3=$(tier_fp "$U" "tenant = 3")
cold_parts() { chq "$U" "SELECT count() FROM system.parts WHERE table = 'events' AND disk_name = 'cold'"; }

# the hot disk "full": ClickHouse keeps more free than there is (other programs on this machine
# may free space meanwhile), so it reserves nothing there
"$FERRY_BIN" lab down --dir "$L" >/dev/null
D=$L/node1/data
free=$(df -B1 --output=avail "$D" | tail -n 1 | tr -d ' ')
mkdir -p "$D/config.d"
cat >"$D/config.d/full.xml" <<EOF
<clickhouse><storage_configuration><disks><default>
  <keep_free_space_bytes>$((free + 1000000000000))</keep_free_space_bytes>
</default></disks></storage_configuration></clickhouse>
EOF
lab_up "$L"
U=$(lab_url "$L" node1)
unreserved=$(chq "$U" "SELECT unreserved_space FROM system.disks WHERE name = 'default'")
[ "$unreserved" = 0 ] || fail "the hot disk is not full: $unreserved bytes unreserved"
ok "hot disk full (unreserved $unreserved bytes); cold volume max_data_part_size = 1"

# an insert fails (not enough space) and writes nothing to the cold disk
set +e
res=$(curl -sS -w '\n%{http_code}' "$U/" --data-binary "INSERT INTO events SELECT 4, toYYYYMMDD($TODAY), 0, now(), number % 97, number FROM numbers(200000)")
set -e
code=${res##*$'\n'}
[ "$code" != 200 ] || fail "an insert with the hot disk full succeeded: $(cold_parts) parts on cold"
grep -q "NOT_ENOUGH_SPACE\|Cannot reserve\|not enough space" <<<"$res" || fail "the insert failed for another reason: $res"
assert_eq 0 "$(cold_parts)" "no inserted part on the cold disk"
# a merge of hot parts: refused or not done, never on the cold disk
chq "$U" "SYSTEM START MERGES events" >/dev/null
set +e
curl -sS "$U/" --data-binary "OPTIMIZE TABLE events PARTITION ID '$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '3-%'")' FINAL" >"$T/opt.out" 2>&1
set -e
assert_eq 0 "$(cold_parts)" "no merged part on the cold disk ($(head -c 300 "$T/opt.out"))"
assert_eq "$want3" "$(tier_fp "$U" "tenant = 3")" "tenant 3's rows unchanged"
ok "hot disk full: the insert fails with NOT_ENOUGH_SPACE and no merge writes to the cold disk"

# ferry's tiering with the hot disk full: ClickHouse 26.7 writes an empty covering part for a
# REPLACE / DETACH (it reserves 1 MiB on the policy); a REPLACE that cannot write it has swapped
# in memory already, and a restart would bring the replaced parts back. So ferry starts no swap
# without room on the hot disk: the jobs wait in their journal, nothing is swapped, ClickHouse
# writes nothing to the cold disk and tries no delete
expect_exit 1 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1 --json
grep -q "unreserved, less than the" <<<"$OUT" || fail "the swap failed for another reason: $OUT"
assert_eq "REPLACE REPLACE" "$(jq -r '[.jobs[].state] | join(" ")' <<<"$OUT")" "the jobs wait before their swap"
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
assert_eq 0 "$(chq "$U" "SELECT count() FROM system.parts WHERE disk_name = 'cold' AND rows = 0")" "no empty part on the cold disk"
# ClickHouse's MOVE PARTITION ... TO DISK 'cold' still works
pid2=$(chq "$U" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '2-%'")
chq "$U" "ALTER TABLE events MOVE PARTITION ID '$pid2' TO DISK 'cold'" >/dev/null
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id = '$pid2'")" "MOVE PARTITION TO DISK 'cold'"
assert_eq "$want2" "$(tier_fp "$U" "tenant = 2")" "tenant 2 after MOVE TO DISK"
# space again (a restart, as after a full disk): the resumed tiering finishes, nothing doubled
"$FERRY_BIN" lab down --dir "$L" >/dev/null
rm -r "$D/config.d"
lab_up "$L"
U=$(lab_url "$L" node1)
expect_exit 0 "$FERRY_BIN" tier --config "$C" --older-than 3d --tenant 1 --json
assert_eq 0 "$(jq .jobs_failed <<<"$OUT")" "the resumed tiering finished ($OUT)"
assert_eq cold "$(chq "$U" "SELECT arrayStringConcat(groupUniqArray(disk_name), ',') FROM system.parts WHERE active AND table = 'events' AND partition_id LIKE '1-%'")" "tenant 1 tiered"
assert_eq "$want1" "$(tier_fp "$U" "tenant = 1")" "tenant 1's data unchanged"
assert_eq "$want2" "$(tier_fp "$U" "tenant = 2")" "tenant 2's data unchanged"
assert_eq "$want3" "$(tier_fp "$U" "tenant = 3")" "tenant 3's data unchanged"
tier_leftovers "$L" node1
assert_eq 0 "$(curl -sS "$U/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete"
ok "hot disk full: MOVE TO DISK works; ferry's swap waits (NOT_ENOUGH_SPACE, no delete tried) and finishes once there is space"

done_testing
