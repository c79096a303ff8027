# The blog's move in a lab: one tenant, 2M rows over 8 days, 5 of them cold (moved to the object
# disk by ClickHouse), moved node1 -> node2 while a writer keeps inserting into whichever node the
# routing table names. Cold partitions travel as pointer files only, hot ones as their bytes; the
# data is identical after, the writer's rows are all there once, nothing is left behind. Then bad
# input: unknown tenant, split or shard, the current shard, a target that is down.
# Catalog: SQLite; move_blog_zk.sh runs the same on ZooKeeper (MOVE_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

if [ "${MOVE_CATALOG:-sqlite}" = zk ]; then
    zk_start
    MV_CATALOG=$(zk_url /moveblog)
fi
L=$T/lab
mv_setup "$L" 3
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2); U3=$(lab_url "$L" node3)
C="$L/mv.conf"
[ -z "${MV_CATALOG:-}" ] || grep -q "^catalog = zk://" "$C" || fail "the config does not name the ZooKeeper catalog"
mv_ingest "$U1" acme 0 8 250000
mv_ingest "$U1" other 0 2 1000
for d in 1 2 3 4 5; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
assert_eq 5 "$(chq "$U1" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "5 cold partitions"
before=$(mv_fp "$U1" acme 0)
blobs_before=$(find "$L/blobs" -type f | wc -l)
ok "lab: 2M rows of acme over 8 days on node1, 5 days cold"

# a writer that follows the routing table, re-reading it before every batch
url_of() { case $1 in node1) echo "$U1" ;; node2) echo "$U2" ;; node3) echo "$U3" ;; esac; }
writer() {
    local i=0 sent=0 shard
    while [ ! -e "$T/stop" ]; do
        shard=$("$FERRY_BIN" route --config "$C" --tenant acme --split 0 --json | jq -r '.slices[0].shards[0]')
        curl -sS --fail "$(url_of "$shard")/" --data-binary "INSERT INTO events SELECT 'acme', 20261108, 0,
            1000000 + $i * 100 + number, number FROM numbers(100)" >/dev/null || { echo "insert failed" >&2; exit 1; }
        i=$((i + 1)); sent=$((sent + 100)); echo "$sent" >"$T/sent"
        sleep 0.1
    done
}
"$FERRY_BIN" route --config "$C" --tenant acme 2>/dev/null || true   # no route yet: ferry move syncs
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null            # inventory sync creates routes
writer & WPID=$!
sleep 1
"$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2 --grace 500 --json >"$T/move.json" 2>"$T/move.err" ||
    fail "move failed: $(cat "$T/move.err")"
sleep 1; touch "$T/stop"; wait "$WPID" || fail "writer failed"
sent=$(cat "$T/sent")
R=$(jq -c 'select(.event == "move")' "$T/move.json")
assert_eq DONE "$(jq -r .state <<<"$R")" "move done"
grep -q '"event":"progress"' "$T/move.json" || fail "no progress lines: $(head -3 "$T/move.json")"
grep -q 'msg="move done".*cold_copied=' "$T/move.err" || fail "finished move not logged"
cold=$(jq .cold_bytes <<<"$R"); cold_copied=$(jq .cold_copied_bytes <<<"$R")
hot=$(jq .hot_bytes <<<"$R"); hot_copied=$(jq .hot_copied_bytes <<<"$R")
echo "# cold $cold bytes real, $cold_copied copied ($(jq .cold_copied_ratio <<<"$R")); hot $hot real, $hot_copied copied"
[ "$cold" -gt 5000000 ] || fail "cold side too small: $cold"
[ "$cold_copied" -lt $((cold / 200)) ] || fail "cold side copied $cold_copied of $cold (more than pointer files)"
[ "$hot_copied" -ge "$hot" ] && [ "$hot_copied" -lt $((hot + hot / 50 + 65536)) ] || fail "hot copied $hot_copied for $hot"
# the cold parts went from the table's folder (no freeze); the hot ones from a freeze
[ "$(jq .cold_parts <<<"$R")" -ge 5 ] || fail "fewer cold parts than cold days: $R"
assert_eq "$(jq .cold_parts <<<"$R")" "$(jq .parts_sent_live <<<"$R")" "every cold part sent live"
[ "$(jq .freezes <<<"$R")" -ge 1 ] || fail "the hot partitions were not frozen: $R"
ok "cold side copied pointer files only ($cold_copied of $cold bytes), hot side its bytes ($hot_copied of $hot)"

# identical data: every partition of the 8 days as before, plus exactly the rows the writer sent
after=$(chq "$U2" "SELECT partition_id, count(), sum(h), groupBitXor(h) FROM (SELECT _partition_id AS
    partition_id, cityHash64(*) AS h FROM events WHERE tenant = 'acme' AND split = 0 AND user < 1000000)
    GROUP BY partition_id ORDER BY partition_id")
assert_eq "$before" "$after" "fingerprints per partition (rows before the move)"
assert_eq "$((2000000 + sent))" "$(chq "$U2" "SELECT count() FROM events WHERE tenant = 'acme'")" "2M rows + the $sent the writer sent"
assert_eq "$sent" "$(chq "$U2" "SELECT uniqExact(user) FROM events WHERE tenant = 'acme' AND user >= 1000000")" "writer rows once each"
assert_eq 0 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'acme'")" "node1 holds nothing of acme"
assert_eq 2000 "$(chq "$U1" "SELECT count() FROM events WHERE tenant = 'other'")" "other tenant untouched"
assert_eq 5 "$(chq "$U2" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "5 partitions served from the cold disk on node2"
assert_eq node2 "$("$FERRY_BIN" route --config "$C" --tenant acme --split 0 --json | jq -r '.slices[0].shards[0]')" "route"
mv_no_residue "$L"
[ "$(find "$L/blobs" -type f | wc -l)" -ge "$blobs_before" ] || fail "objects were removed"
for u in "$U1" "$U2"; do assert_eq 0 "$(curl -s "$u/ferry/status" | jq .refused_deletes)" "no delete attempted on the blob directory"; done
ok "data identical per partition, writer's $sent rows exactly once, source clean, no residue, object storage untouched"

# ---- bad input -----------------------------------------------------------------------------
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant nope --split 0 --to node3
assert_contains "$ERR" "unknown tenant 'nope'" "unknown tenant"; assert_eq "" "$OUT" "nothing on stdout"
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 7 --to node3
assert_contains "$ERR" "split" "unknown split"
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node9
assert_contains "$ERR" "unknown shard 'node9'" "unknown shard"
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node2
assert_contains "$ERR" "already served by node2" "current shard"
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 0
assert_contains "$ERR" "needs --tenant" "missing --to"
kill -KILL "$(lab_pid "$L" node3)"
wait_for 60 sh -c "! curl -s -m 1 $U3/ping >/dev/null"
expect_exit 1 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to node3
assert_contains "$ERR" "target shard node3 is not reachable" "target down"
"$FERRY_BIN" catalog export --config "$C" >"$T/dump.json" || fail "catalog export"
assert_eq 1 "$(jq '[.moves[] | select(.tenant == "acme")] | length' "$T/dump.json")" "one move of acme in the journal"
assert_eq 0 "$(jq '[.moves[] | select(.to == "node3")] | length' "$T/dump.json")" "nothing journaled for the refused move"
ok "bad input: unknown tenant/split/shard, current shard (exit 2), target down (exit 1), nothing journaled"
done_testing
