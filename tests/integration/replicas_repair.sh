# rf = 2 (cluster-wide) in a 4-node lab, writes through `ferry router`. Every insert goes to both
# replicas of its slice. One replica is kill -9'd during ingestion: each batch then fails clearly
# (the router names the dead shard; the rows reached the live replica, and a retry with the same
# token is deduplicated there). A partition written meanwhile is tiered on the live replica. After
# the node returns, `ferry repair --dry-run` reports the missing writes, `ferry repair` copies the
# missing parts (cold: pointer files only) and both replicas end with identical rows and
# fingerprints per partition; a second run finds everything in sync. Last, a coordinator with
# [cluster] repair_interval repairs a missed write by itself.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"

L=$T/lab
lab_up "$L" --nodes 4
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C"
events_conf "$C" "shard_timeout = 5s"
declare -A U
for n in node1 node2 node3 node4; do U[$n]=$(lab_url "$L" "$n"); done
events_table --tiered "${U[@]}"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
ROUTE=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
A=${ROUTE%%,*}; B=${ROUTE##*,}
[ "$A" != "$B" ] && [ -n "$A" ] && [ -n "$B" ] || fail "acme not on two shards: $ROUTE"
ok "rf = 2: acme placed on $A and $B"

bg_start "$T/router.log" "$FERRY_BIN" router --config "$C" --listen 127.0.0.1:0 --port-file "$T/router.port"
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 60 curl -sf "$R/ping"

# batch I DAY: 200 rows of acme, ids I*200..I*200+199, one insert through the router with a
# fixed token; prints the HTTP status, the body to $T/last.body
batch() {
    local i=$1 day=$2
    seq $((i * 200)) $((i * 200 + 199)) | awk -v d="$day" '{printf "acme\t%s\t%d\t%d\tv%d\n", d, $1 % 97, $1, $1}' >"$T/batch.tsv"
    curl -sS -m 60 -o "$T/last.body" -w '%{http_code}' --data-binary @"$T/batch.tsv" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=acme-b$i"
}
for i in $(seq 0 9); do
    d=20261110; [ $((i % 2)) = 1 ] && d=20261111
    assert_eq 200 "$(batch "$i" "$d")" "batch $i accepted"
done
for n in "$A" "$B"; do assert_eq 2000 "$(chq "${U[$n]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "2000 rows on $n"; done
ok "10 batches through the router: every row on both replicas"
assert_eq 200 "$(batch 3 20261111)" "a retried batch (same token)"
for n in "$A" "$B"; do assert_eq 2000 "$(chq "${U[$n]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "retry deduplicated on $n"; done
ok "a retried batch with the same token is deduplicated on both replicas"

# ---- kill -9 one replica during ingestion ----------------------------------------------------
KPID=$(lab_pid "$L" "$B")
writer() {
    local i=10 code ok=0 failed=0
    while [ ! -e "$T/stop" ] && [ $i -lt 60 ]; do
        d=20261110; [ $((i % 3)) = 1 ] && d=20261111; [ $((i % 3)) = 2 ] && d=20261112
        code=$(batch "$i" "$d")
        if [ "$code" = 200 ]; then ok=$((ok + 1)); else failed=$((failed + 1)); cp "$T/last.body" "$T/fail.body"; fi
        echo "$i $code" >>"$T/codes"
        i=$((i + 1))
        sleep 0.05
    done
    echo "$ok $failed $i" >"$T/writer.out"
}
writer & WPID=$!
wait_for 60 bash -c "[ \$(wc -l <'$T/codes' 2>/dev/null || echo 0) -ge 5 ]"
kill -KILL "$KPID"
wait_for 30 sh -c "! curl -s -m 1 ${U[$B]}/ping >/dev/null"
wait "$WPID" || fail "writer failed"
read -r nok nfail nlast <"$T/writer.out"
echo "# writer: $nok batches accepted, $nfail failed, $nlast sent in all (ids < $((nlast * 200)))"
[ "$nfail" -gt 10 ] || fail "expected the batches after the kill to fail ($nfail failed)"
assert_contains "$(cat "$T/fail.body")" "$B" "the failure names the dead shard"
total=$((nlast * 200))
assert_eq "$total" "$(chq "${U[$A]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "every batch's rows reached the live replica $A"
assert_eq "$total" "$(chq "${U[$A]}" "SELECT uniqExact(id) FROM events WHERE tenant = 'acme'")" "each once"
ok "kill -9 of $B during ingestion: batches fail naming $B, rows keep reaching $A ($total rows)"

# a partition written while B was down goes cold on A
chq "${U[$A]}" "ALTER TABLE events MOVE PARTITION ('acme', 20261112, 0) TO DISK 'cold'" >/dev/null
lab_up "$L"
U[$B]=$(lab_url "$L" "$B")
wait_for 60 curl -sf "${U[$B]}/ping"
before_b=$(chq "${U[$B]}" "SELECT count() FROM events WHERE tenant = 'acme'")
[ "$before_b" -lt "$total" ] || fail "$B missed no writes ($before_b of $total)"
ok "$B is back with $before_b of $total rows"

# ---- repair -----------------------------------------------------------------------------------
expect_exit 1 "$FERRY_BIN" repair --config "$C" --dry-run --json
DIFF=$(jq -c 'select(.event == "partition" and .action != "in-sync")' <<<"$OUT" | wc -l)
[ "$DIFF" -ge 1 ] || fail "dry run found no difference: $OUT"
assert_eq "$before_b" "$(chq "${U[$B]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "dry run changed nothing"
ok "repair --dry-run reports $DIFF partition(s) to repair and changes nothing"

"$FERRY_BIN" repair --config "$C" --grace 500 --json >"$T/rep.json" 2>"$T/rep.err" || fail "repair failed: $(cat "$T/rep.json" "$T/rep.err" | tail -5)"
S=$(jq -c 'select(.event == "summary")' "$T/rep.json")
echo "# $S"
assert_eq 0 "$(jq .failed <<<"$S")" "no partition failed"
[ "$(jq .repaired <<<"$S")" -ge 1 ] || fail "nothing repaired: $S"
jq -c 'select(.event == "partition" and .action != "in-sync")' "$T/rep.json" | while read -r l; do
    [ "$(jq -r .source <<<"$l")" = "$A" ] || fail "repaired from $(jq -r .source <<<"$l"), not $A"
    [ "$(jq -r .repaired <<<"$l")" = true ] || fail "not repaired: $l"
done
cold_pid=$(chq "${U[$A]}" "SELECT DISTINCT partition_id FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")
CL=$(jq -c --arg p "$cold_pid" 'select(.event == "partition" and .partition_id == $p)' "$T/rep.json")
[ "$(jq .cold_copied_bytes <<<"$CL")" -gt 0 ] && [ "$(jq .hot_copied_bytes <<<"$CL")" = 0 ] || fail "cold partition not copied as pointers: $CL"
jq -r 'select(.event == "partition") | "# \(.partition_id): \(.action), \(.parts_sent) part(s) sent"' "$T/rep.json"
fp() { chq "$1" "SELECT _partition_id, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)), uniqExact(id) FROM events WHERE tenant = 'acme' GROUP BY 1 ORDER BY 1"; }
assert_eq "$(fp "${U[$A]}")" "$(fp "${U[$B]}")" "identical per-partition rows and fingerprints on $A and $B"
assert_eq "$total" "$(chq "${U[$B]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$B holds every row"
assert_eq "$total" "$(chq "${U[$B]}" "SELECT uniqExact(id) FROM events WHERE tenant = 'acme'")" "each once"
assert_eq 1 "$(chq "${U[$B]}" "SELECT uniqExact(partition_id) FROM system.parts WHERE active AND table = 'events' AND disk_name = 'cold'")" "the cold partition is cold on $B too"
expect_exit 0 "$FERRY_BIN" sweep --config "$C" --json
assert_eq "true 0 0" "$(jq -r '"\(.complete) \(.drift | length) \(.dangling | length)"' <<<"$OUT")" "sweep after the repair: complete, no drift (the part records name $B too), no dangling pointer: $(jq -c .drift <<<"$OUT")"
ok "ferry repair: $B brought back to identical per-partition rows and checksums (cold part as pointers)"

"$FERRY_BIN" repair --config "$C" --json >"$T/rep2.json" || fail "second repair not clean: $(tail -3 "$T/rep2.json")"
S2=$(jq -c 'select(.event == "summary")' "$T/rep2.json")
assert_eq "$(jq .partitions <<<"$S2")" "$(jq .in_sync <<<"$S2")" "second run: everything in sync"
# and the replica serves again: new batches reach both
assert_eq 200 "$(batch 100 20261110)" "a batch after the repair"
for n in "$A" "$B"; do assert_eq $((total + 200)) "$(chq "${U[$n]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "new rows on $n"; done
ok "second repair finds everything in sync; $B receives writes again"
ROUTER_PID=$BG_PID

# ---- the coordinator repairs on its own ([cluster] repair_interval) ---------------------------
# rows that reach only A (as if B had missed a batch)
chq "${U[$A]}" "INSERT INTO events SELECT 'acme', 20261111, 0, number % 97, 500000 + number, 'late' FROM numbers(300)" >/dev/null
want=$(chq "${U[$A]}" "SELECT count() FROM events WHERE tenant = 'acme'")
sed 's/^rf = 2$/rf = 2\nrepair_interval = 2s/' "$C" >"$L/coord.conf"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$L/coord.conf" --port-file "$T/coord.port"
# the run's summary line comes once the whole run is over (the rows land a little earlier)
wait_for 180 grep -q 'msg="scheduled repair".*repaired=1' "$T/coord.log" ||
    fail "no scheduled repair logged: $(grep -v 'replica sync' "$T/coord.log" | tail -3)"
assert_eq "$want" "$(chq "${U[$B]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$B has the rows only $A had"
assert_eq "$(fp "${U[$A]}")" "$(fp "${U[$B]}")" "identical after the scheduled repair"
kill -TERM "$BG_PID" 2>/dev/null || true
ok "the coordinator's scheduled repair (repair_interval = 2s) copied rows only $A had to $B"
kill -TERM "$ROUTER_PID" 2>/dev/null || true
done_testing
