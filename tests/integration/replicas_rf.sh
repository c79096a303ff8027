# Raising and lowering a tenant's replication factor in a 3-node lab. Two tenants with 5 cold
# days (moved to the object disk) and 3 hot days: acme (the blog's size, 2M rows) and big (2.5x the
# rows). `ferry tenant set-rf T 2` + `ferry rebalance` adds a replica of each with a clone move:
# the cold side costs only pointer files (a few KB, the same for both tenants), the hot side its
# bytes, the source stays routed, and both replicas hold identical data per partition. `ferry
# repair` finds them in sync. Lowering the rf back removes one replica (route first, then the
# data), never touches object storage and leaves nothing behind. Then bad input.
# Catalog: SQLite; replicas_rf_zk.sh runs the same on ZooKeeper (REPLICAS_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

if [ "${REPLICAS_CATALOG:-sqlite}" = zk ]; then
    zk_start
    MV_CATALOG=$(zk_url /replicasrf)
fi
L=$T/lab
lab_up "$L" --nodes 3
mv_conf "$L"
# zones: node1 and node2 in zone a, node3 in zone b: a second replica goes to the other zone
sed -i -e '/^\[shard "node1"\]/a zone = a' -e '/^\[shard "node2"\]/a zone = a' \
    -e '/^\[shard "node3"\]/a zone = b' "$L/mv.conf"
for u in $(mv_urls "$L"); do chq "$u" "$MV_DDL" >/dev/null; done
"$FERRY_BIN" init --config "$L/mv.conf" >/dev/null || fail "ferry init failed"
C="$L/mv.conf"
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" "$n"); done
mv_ingest "${U[node1]}" acme 0 8 250000
mv_ingest "${U[node1]}" big 0 8 625000 7
for t in acme big; do
    for d in 1 2 3 4 5; do chq "${U[node1]}" "ALTER TABLE events MOVE PARTITION ('$t', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
done
assert_eq 10 "$(chq "${U[node1]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "10 cold partitions"
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null || fail "inventory sync failed"
blobs_before=$(find "$L/blobs" -type f | wc -l)
ok "lab: acme 2M rows, big 5M rows, 8 days each on node1, 5 of them cold"

# ---- rf 1 -> 2 ---------------------------------------------------------------------------
"$FERRY_BIN" tenant show acme --config "$C" --json >"$T/show.json" || fail "tenant show failed"
assert_eq "1 false" "$(jq -r '"\(.rf) \(.rf_override)"' "$T/show.json")" "acme: rf 1 (cluster default)"
"$FERRY_BIN" tenant set-rf acme 2 --config "$C" --json >"$T/setrf.json" || fail "set-rf failed"
assert_eq "1 2" "$(jq -r '"\(.from) \(.to)"' "$T/setrf.json")" "set-rf acme 1 -> 2"
assert_eq "2 true" "$("$FERRY_BIN" tenant show acme --config "$C" --json | jq -r '"\(.rf) \(.rf_override)"')" "tenant show: rf 2 (override)"
"$FERRY_BIN" tenant show acme --config "$C" | grep -q "rf 2" || fail "text show lacks the rf"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan.json" || fail "plan failed"
P=$(jq -c 'select(.event == "plan")' "$T/plan.json")
assert_eq 1 "$(jq '.moves | length' <<<"$P")" "one step planned"
assert_eq "clone acme node1" "$(jq -r '.moves[0] | "\(.kind) \(.tenant) \(.from)"' <<<"$P")" "a clone of acme from node1"
NEW=$(jq -r '.moves[0].to' <<<"$P")
assert_eq node3 "$NEW" "the new replica goes to the other zone (node3, zone b; node1 and node2 are zone a)"
assert_eq node1 "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "dry run changed nothing"

"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb.json" 2>"$T/rb.err" || fail "rebalance failed: $(tail -5 "$T/rb.err")"
R=$(jq -c 'select(.event == "move")' "$T/rb.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "clone done"
assert_contains "$(jq -r .move <<<"$R")" "cl-" "journaled as a clone"
acme_cold=$(jq .cold_bytes <<<"$R"); acme_cc=$(jq .cold_copied_bytes <<<"$R")
acme_hot=$(jq .hot_bytes <<<"$R"); acme_hc=$(jq .hot_copied_bytes <<<"$R")
echo "# acme: cold $acme_cold bytes, $acme_cc copied; hot $acme_hot bytes, $acme_hc copied"
assert_eq "node1,$NEW" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "route: the source kept, the new replica added"
assert_eq "$(mv_fp "${U[node1]}" acme 0)" "$(mv_fp "${U[$NEW]}" acme 0)" "acme: identical per-partition fingerprints on node1 and $NEW"
assert_eq 2000000 "$(chq "${U[$NEW]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "2M rows on the new replica"
assert_eq 2000000 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "2M rows still on the source"
assert_eq 5 "$(chq "${U[$NEW]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold' AND partition LIKE '%acme%'")" "5 cold partitions on the new replica"
ok "acme rf 1 -> 2: clone to $NEW, source kept, data identical"

"$FERRY_BIN" tenant set-rf big 2 --config "$C" >/dev/null || fail "set-rf big failed"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb2.json" 2>"$T/rb2.err" || fail "rebalance big failed: $(tail -5 "$T/rb2.err")"
R2=$(jq -c 'select(.event == "move")' "$T/rb2.json")
assert_eq DONE "$(jq -r .state <<<"$R2")" "big clone done"
NEWB=$(jq -r .to <<<"$R2")
assert_eq node3 "$NEWB" "big's new replica in the other zone too"
big_cold=$(jq .cold_bytes <<<"$R2"); big_cc=$(jq .cold_copied_bytes <<<"$R2")
acme_cp=$(jq .cold_parts <<<"$R"); big_cp=$(jq .cold_parts <<<"$R2")
echo "# big: cold $big_cold bytes, $big_cc copied; cold parts: acme $acme_cp, big $big_cp"
assert_eq "$(mv_fp "${U[node1]}" big 0)" "$(mv_fp "${U[$NEWB]}" big 0)" "big: identical per-partition fingerprints"
[ "$acme_cold" -gt 5000000 ] || fail "acme cold side too small: $acme_cold"
[ "$big_cold" -gt $((acme_cold * 2)) ] || fail "big's cold side ($big_cold) is not much larger than acme's ($acme_cold)"
[ "$acme_cc" -gt 0 ] && [ "$acme_cc" -lt 65536 ] || fail "acme cold copied $acme_cc bytes (not a few KB of pointers)"
[ "$big_cc" -gt 0 ] && [ "$big_cc" -lt 65536 ] || fail "big cold copied $big_cc bytes (not a few KB of pointers)"
# pointer bytes follow the parts and their files (a wide part has a pointer per column file),
# not the data: as a fraction of the cold data they do not grow with it
[ $((big_cc * 1000000 / big_cold)) -le $((acme_cc * 1000000 / acme_cold)) ] || fail "big's pointer fraction ($big_cc / $big_cold) above acme's ($acme_cc / $acme_cold)"
[ "$big_cc" -lt $((big_cold / 500)) ] && [ "$acme_cc" -lt $((acme_cold / 500)) ] || fail "pointer bytes above 0.2% of the cold data"
[ "$acme_hc" -ge "$acme_hot" ] || fail "hot copied $acme_hc for $acme_hot"
ok "cold replica cost: acme $acme_cc B for $acme_cold B, big $big_cc B for $big_cold B (pointer files only)"

"$FERRY_BIN" repair --config "$C" --json >"$T/rep.json" 2>"$T/rep.err" || fail "repair failed: $(cat "$T/rep.err")"
S=$(jq -c 'select(.event == "summary")' "$T/rep.json")
assert_eq "2 16 16 0" "$(jq -r '"\(.slices) \(.partitions) \(.in_sync) \(.failed)"' <<<"$S")" "repair: 2 replicated slices, 16 partitions in sync"
ok "ferry repair finds both replicated slices in sync"

# ---- rf 2 -> 1 -----------------------------------------------------------------------------
"$FERRY_BIN" tenant set-rf acme default --config "$C" >/dev/null || fail "set-rf default failed"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan2.json" || fail "plan failed"
P2=$(jq -c 'select(.event == "plan")' "$T/plan2.json")
assert_eq "drop acme" "$(jq -r '.moves[0] | "\(.kind) \(.tenant)"' <<<"$P2")" "a drop of one acme replica planned"
DROP=$(jq -r '.moves[0].from' <<<"$P2")
KEEP=node1; [ "$DROP" = node1 ] && KEEP=$NEW
fp_keep=$(mv_fp "${U[$KEEP]}" acme 0)
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb3.json" 2>"$T/rb3.err" || fail "rebalance (drop) failed: $(tail -5 "$T/rb3.err")"
assert_eq "$KEEP" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "route: one replica left"
assert_eq 0 "$(chq "${U[$DROP]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "the dropped replica holds nothing of acme"
assert_eq "$fp_keep" "$(mv_fp "${U[$KEEP]}" acme 0)" "the kept replica is unchanged"
assert_eq 5000000 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = 'big'")" "big untouched"
mv_no_residue "$L"
[ "$(find "$L/blobs" -type f | wc -l)" -ge "$blobs_before" ] || fail "objects were removed"
for n in node1 node2 node3; do assert_eq 0 "$(curl -s "${U[$n]}/ferry/status" | jq .refused_deletes)" "no delete attempted on the blob directory ($n)"; done
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan3.json"
# replica counts match every tenant's rf now (the plan may still move acme's single replica
# onto node2, which holds nothing: an empty shard counts as added, as for any rf-1 slice)
assert_eq 0 "$(jq -c 'select(.event == "plan") | [.moves[] | select(.kind != "move")] | length' "$T/plan3.json")" "no clone or drop left to plan"
ok "acme rf 2 -> 1: replica on $DROP removed cleanly, $KEEP unchanged, objects untouched, no residue"

# ---- bad input ------------------------------------------------------------------------------
expect_exit 2 "$FERRY_BIN" tenant set-rf acme 4 --config "$C"
assert_contains "$ERR" "only 3 active shard" "rf above the shard count"; assert_eq "" "$OUT" "nothing on stdout"
expect_exit 2 "$FERRY_BIN" tenant set-rf acme 0 --config "$C"
assert_contains "$ERR" "not a replication factor" "rf 0"
expect_exit 2 "$FERRY_BIN" tenant set-rf nope 2 --config "$C"
assert_contains "$ERR" "not registered" "unknown tenant"
expect_exit 2 "$FERRY_BIN" repair --config "$C" --bogus
assert_contains "$ERR" "unknown option" "repair: unknown option"
ok "bad input refused with exit 2"
done_testing
