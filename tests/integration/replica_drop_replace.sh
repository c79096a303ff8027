# A dropped replica lets go of the slice's partitions by REPLACE PARTITION from ferry's empty twin
# table, as a move's source does (lib/flow/move_release.c, called by rs_remove_slice in
# lib/flow/replica_sync.c), not by DETACH PARTITION, which clones every pointer file first (about
# 1 s for 40 cold parts). The REPLACE leaves the parts to the server's cleanup thread, whose
# removal deletes the objects of a pointer file that counts no owner beside ClickHouse's links:
# the replica's own cold parts (ClickHouse moved them to the object disk itself) are pinned
# first, so the other replica keeps every object its pointer files name.
# rf 2 on two nodes: node1 has two days moved to the cold disk by ClickHouse and one hot; a
# repair gives node2 the cold days as ferry's pointer parts (sharing node1's objects) and the
# hot one; a fourth day is inserted on both and moved to the cold disk by node2's ClickHouse.
# node2 (drained, so the drop takes its replica) holds all three kinds: native cold, ferry-owned
# cold and hot partitions.
# Checked: all four partitions released by REPLACE (the native one pinned), the dropped replica
# holds nothing active or detached once its outdated parts are gone, the other every row, no
# object deleted or attempted on either node, and the sweep finds no drift.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

MV_DDL="$MV_DDL$MV_FAST_CLEANUP" # the replaced parts removed while the test waits
L=$T/lab
mv_rf2_acme "$L"
mv_ingest "$U1" acme 0 3 4000 # node1: 2026-11-01..03
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
"$FERRY_BIN" repair --config "$C" --tenant acme --grace 0 >"$T/rep.out" 2>"$T/rep.err" ||
    fail "repair failed: $(tail -5 "$T/rep.err")"
# the repair sends the two cold days' pointer parts live from node1's table, freezing only the
# hot day (a freeze would leave node1's own pointer files read-only: lib/flow/replica_sync.c)
assert_eq 2 "$(grep -c 'msg="replica sync" .* sent_live=[1-9]' "$T/rep.err")" "two partitions sent live by the repair"
assert_eq 1 "$(grep -c 'op=freeze status=200' "$L/node1/node.log")" "one partition frozen on node1 (the hot one)"
for u in "$U1" "$U2"; do
    chq "$u" "INSERT INTO events SELECT 'acme', 20261104, 0, number % 1000, number FROM numbers(3000)" >/dev/null
done
chq "$U2" "ALTER TABLE events MOVE PARTITION ('acme', 20261104, 0) TO DISK 'cold'" >/dev/null
want=$(mv_fp "$U1" acme 0)
assert_eq "$want" "$(mv_fp "$U2" acme 0)" "both replicas hold the same rows"
cold() { chq "$1" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'"; }
assert_eq "2 3" "$(cold "$U1") $(cold "$U2")" "node1: 2 cold partitions (its own), node2: 3 (2 from the repair, 1 its own)"
keys() { (cd "$L/blobs" && find . -type f | sort); }
keys >"$T/keys.before"

"$FERRY_BIN" tenant set-rf acme 1 --config "$C" >/dev/null || fail "set-rf acme 1"
# node2 draining: the drop takes its replica ("a replica on a draining shard first"), which
# holds every kind of partition
"$FERRY_BIN" shard drain node2 --config "$C" >/dev/null || fail "shard drain node2"
"$FERRY_BIN" rebalance --config "$C" --grace 0 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "the rebalance (a replica drop) failed: $(tail -5 "$T/rb.err")"
left=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
assert_eq node1 "$left" "acme on node1 only after the drop"
gone=node2
declare -A U=([node1]=$U1 [node2]=$U2)
released=$(grep "replica drop: source partitions released" "$T/rb.err" || true)
assert_contains "$released" "server=$gone" "the drop's release is logged for $gone"
assert_contains "$released" "by_replace=4 to_detach=0" "all four partitions released by REPLACE"
pinned=$(grep -o "replica drop: the source's own cold parts pinned\" .* parts=[0-9]* held=[0-9]*" "$T/rb.err" || true)
[[ "$pinned" =~ parts=([0-9]+)\ held=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] ||
    fail "the dropped replica's own cold parts pinned: '$pinned' in: $(grep -i -e pin -e released "$T/rb.err" | head -5)"
assert_eq "$want" "$(mv_fp "${U[$left]}" acme 0)" "$left holds every row"
assert_eq 0 "$(chq "${U[$gone]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$gone serves nothing of acme"
assert_eq 0 "$(chq "${U[$gone]}" "SELECT count() FROM system.detached_parts WHERE table = 'events'")" "nothing detached on $gone"
no_outdated() { [ "$(chq "${U[$gone]}" "SELECT count() FROM system.parts WHERE NOT active AND table = 'events'")" = 0 ]; }
wait_for 120 no_outdated || fail "$gone kept outdated parts: $(outdated_parts "${U[$gone]}" events)"
for n in node1 node2; do
    assert_eq 0 "$(curl -sS "${U[$n]}/ferry/status" | jq .refused_deletes)" "ClickHouse never tried to delete an object on $n"
done
keys >"$T/keys.after"
assert_eq "" "$(comm -23 "$T/keys.before" "$T/keys.after")" "no object gone from the store"
assert_eq "$want" "$(mv_fp "${U[$left]}" acme 0)" "$left still reads every row (its objects all there)"
expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
assert_eq "true 0" "$(jq -r '"\(.complete) \(.drift | length)"' <<<"$OUT")" "sweep complete, no drift"
ok "the replica on $gone dropped by REPLACE (its own cold parts pinned): nothing deleted, no drift"
done_testing
