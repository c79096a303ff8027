# [router] min_insert_replicas = 1 with rf = 2 on a 2-node lab: while one replica is stopped,
# inserts through the router are acknowledged (HTTP 200, X-Ferry-Missed-Shards naming it) once the
# live replica took them, and the slice is recorded for repair in the catalog before the answer.
# While the record is open, dropping a replica (rf lowered, ferry rebalance) is refused. The node
# comes back; `ferry repair` copies from the replica that took every acknowledged write and clears
# the record; both replicas end exact (every acknowledged row once, identical per-partition
# fingerprints), and the replica may then be dropped.
# Catalog: SQLite; replicas_min_insert_zk.sh runs the same on ZooKeeper (REPLICAS_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

L=$T/lab
lab_up "$L" --nodes 2
C=$L/rf2.conf
lab_rf_conf "$L" 2 "$C"
if [ "${REPLICAS_CATALOG:-sqlite}" = zk ]; then
    zk_start
    sed -i "s#^catalog = .*#catalog = $(zk_url /mininsert)#" "$C"
fi
events_conf "$C" "shard_timeout = 5s" "min_insert_replicas = 1"
declare -A U
for n in node1 node2; do U[$n]=$(lab_url "$L" "$n"); done
events_table "${U[@]}"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
ROUTE=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
A=${ROUTE%%,*}; B=${ROUTE##*,}
[ "$A" != "$B" ] && [ -n "$A" ] && [ -n "$B" ] || fail "acme not on two shards: $ROUTE"

bg_start "$T/router.log" "$FERRY_BIN" router --config "$C" --listen 127.0.0.1:0 --port-file "$T/router.port"
ROUTER_PID=$BG_PID
wait_for 20 test -s "$T/router.port"
R=http://127.0.0.1:$(cat "$T/router.port")
wait_for 60 curl -sf "$R/ping"

# batch I DAY: 200 rows of acme (ids I*200..), one insert with a fixed token; prints the HTTP
# status; headers to $T/last.hdr, body to $T/last.body
batch() {
    local i=$1 day=$2
    seq $((i * 200)) $((i * 200 + 199)) | awk -v d="$day" '{printf "acme\t%s\t%d\t%d\tv%d\n", d, $1 % 97, $1, $1}' >"$T/batch.tsv"
    curl -sS -m 60 -D "$T/last.hdr" -o "$T/last.body" -w '%{http_code}' --data-binary @"$T/batch.tsv" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=acme-b$i"
}
count() { chq "$1" "SELECT count() FROM events WHERE tenant = 'acme'"; }
t0=$(date +%s%N)
for i in 0 1 2 3; do assert_eq 200 "$(batch "$i" 20261110)" "batch $i accepted"; done
echo "# 4 batches to both replicas in $((($(date +%s%N) - t0) / 1000000)) ms (load $(cut -d' ' -f1 /proc/loadavg))"
for n in "$A" "$B"; do assert_eq 800 "$(count "${U[$n]}")" "800 rows on $n"; done
grep -qi '^x-ferry-missed-shards' "$T/last.hdr" && fail "a write both replicas took names missed shards"
ok "rf = 2 on $A and $B: writes reach both replicas"

# ---- B stopped: writes acknowledged by A alone --------------------------------------------------
kill -KILL "$(lab_pid "$L" "$B")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$B]}/ping >/dev/null"
acked=0
t0=$(date +%s%N)
for i in $(seq 4 13); do
    d=20261110; [ $((i % 2)) = 1 ] && d=20261111
    code=$(batch "$i" "$d")
    [ "$code" = 200 ] || fail "batch $i with $B down: HTTP $code: $(cat "$T/last.body")"
    assert_contains "$(tr -d '\r' <"$T/last.hdr" | grep -i '^x-ferry-missed-shards')" "$B" "batch $i: the answer names the shard that missed it"
    acked=$((acked + 1))
done
echo "# $acked degraded batches (200 rows, $B down) acknowledged in $((($(date +%s%N) - t0) / 1000000)) ms in all, curl included (load $(cut -d' ' -f1 /proc/loadavg))"
total=$(((4 + acked) * 200))
assert_eq "$total" "$(count "${U[$A]}")" "every acknowledged row on $A"
assert_eq "$total" "$(chq "${U[$A]}" "SELECT uniqExact(id) FROM events WHERE tenant = 'acme'")" "each once"
grep -q 'insert acknowledged with replicas missing; recorded for repair' "$T/router.log" || fail "the router logged no degraded write"
ok "$B stopped: $acked batches acknowledged by $A alone (min_insert_replicas = 1), each naming $B"

# the catalog's record of the slice, as ferry status shows it
"$FERRY_BIN" status --config "$C" --json >"$T/st.json" || fail "ferry status"
assert_eq "acme 0 $B $A $acked" "$(jq -r '.repair_needed[] | "\(.tenant) \(.split) \(.missed) \(.held) \(.writes)"' "$T/st.json")" "ferry status: acme/0 missed by $B, held by $A, $acked writes"
assert_contains "$("$FERRY_BIN" status --config "$C")" "acme/0 missed by $B, held by $A" "ferry status (text) lists the slice"
ok "the slice is recorded for repair in the catalog (ferry status)"

# a retry of an acknowledged batch (same token) adds nothing
assert_eq 200 "$(batch 7 20261111)" "a retried batch"
assert_eq "$total" "$(count "${U[$A]}")" "the retry was deduplicated on $A"

# ---- B back: the record keeps its replica; repair makes both exact --------------------------------
lab_up "$L"
U[$B]=$(lab_url "$L" "$B")
wait_for 60 curl -sf "${U[$B]}/ping"
before_b=$(count "${U[$B]}")
assert_eq 800 "$before_b" "$B is back with the 800 rows it took"
"$FERRY_BIN" tenant set-rf acme 1 --config "$C" >/dev/null || fail "set-rf 1"
"$FERRY_BIN" rebalance --config "$C" >"$T/rb0.out" 2>&1 && fail "rebalance dropped a replica of a slice awaiting repair"
assert_contains "$(cat "$T/rb0.out")" "ferry repair" "dropping a replica of a slice written with a replica missing is refused"
assert_eq "$ROUTE" "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')" "the route still has both replicas"
ok "while the slice awaits repair, no replica of it is dropped"

"$FERRY_BIN" repair --config "$C" --grace 500 --json >"$T/rep.json" 2>"$T/rep.err" || fail "repair failed: $(tail -5 "$T/rep.json" "$T/rep.err")"
jq -c 'select(.event == "partition" and .action != "in-sync")' "$T/rep.json" | while read -r l; do
    [ "$(jq -r .source <<<"$l")" = "$A" ] || fail "repaired from $(jq -r .source <<<"$l"), not $A"
done
grep -q 'are on every replica now' "$T/rep.err" || fail "repair did not clear the record: $(tail -3 "$T/rep.err")"
assert_eq 0 "$("$FERRY_BIN" status --config "$C" --json | jq '.repair_needed | length')" "ferry status: nothing awaits repair"
fp() { chq "$1" "SELECT _partition_id, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)), uniqExact(id) FROM events WHERE tenant = 'acme' GROUP BY 1 ORDER BY 1"; }
for n in "$A" "$B"; do
    assert_eq "$total" "$(count "${U[$n]}")" "$n holds every acknowledged row"
    assert_eq "$total" "$(chq "${U[$n]}" "SELECT uniqExact(id) FROM events WHERE tenant = 'acme'")" "each once on $n"
done
assert_eq "$(fp "${U[$A]}")" "$(fp "${U[$B]}")" "identical per-partition rows and fingerprints on $A and $B"
ok "ferry repair: $B has every row acknowledged while it was down; both replicas exact"

# the record is gone: the rf change goes through now
"$FERRY_BIN" rebalance --config "$C" >"$T/rb.out" 2>&1 || fail "rebalance after the repair: $(tail -3 "$T/rb.out")"
assert_eq 1 "$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | length')" "one replica left"
ok "after the repair the replica can be dropped"
kill -TERM "$ROUTER_PID" 2>/dev/null || true
done_testing
