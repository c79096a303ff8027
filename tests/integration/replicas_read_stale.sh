# Reads keep off a replica that missed acknowledged writes (docs/routing.md "Replicas that missed
# writes"). rf = 2 on a 2-node lab, [router] min_insert_replicas = 1: the slice's first replica
# in route order (the one in_order and first_or_random prefer) is killed, writes through the
# router are acknowledged by the other one alone and recorded for repair; the node comes back
# holding fewer rows. Then a router of every ClickHouse load_balancing policy answers many reads
# of the tenant, each with every acknowledged row, and none of them sends a query to the replica
# that missed the rows (its query count in GET /ferry/router stays 0). With the up-to-date
# replica down, a read falls back to the stale one (default) and says so in its log and metric,
# or is refused with [router] fallback_to_stale_replicas = false. Writes while it is down make
# each replica miss some: the default router reads one and says so, the strict one refuses with
# ClickHouse's ALL_REPLICAS_ARE_STALE. After `ferry repair` (which merges them) the replica is
# read again (its query count in GET /ferry/router grows under in_order).
# Catalog: SQLite; replicas_read_stale_zk.sh runs the same on ZooKeeper (REPLICAS_CATALOG=zk).
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
    sed -i "s#^catalog = .*#catalog = $(zk_url /readstale)#" "$C"
fi
events_conf "$C" "shard_timeout = 5s" "min_insert_replicas = 1"
declare -A U
for n in node1 node2; do U[$n]=$(lab_url "$L" "$n"); done
events_table "${U[@]}"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add acme --config "$C" >/dev/null || fail "tenant add"
ROUTE=$("$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | join(",")')
# B: the replica that will miss writes, first in route order; A: the other
B=${ROUTE%%,*}; A=${ROUTE##*,}
[ "$A" != "$B" ] && [ -n "$A" ] && [ -n "$B" ] || fail "acme not on two shards: $ROUTE"

# router NAME [CONFIG LINES...]: a router with its own copy of the config; sets RP[NAME] (PID)
# and RU[NAME] (URL)
declare -A RP RU
router() {
    local name=$1 conf=$T/router-$1.conf line
    shift
    cp "$C" "$conf"
    for line in "$@"; do printf '%s\n' "$line" >>"$conf"; done
    bg_start "$T/router-$name.log" "$FERRY_BIN" router --config "$conf" --listen 127.0.0.1:0 --port-file "$T/router-$name.port"
    RP[$name]=$BG_PID
}
router_ready() {
    local name=$1
    wait_for 20 test -s "$T/router-$name.port"
    RU[$name]=http://127.0.0.1:$(cat "$T/router-$name.port")
    wait_for 60 curl -sf "${RU[$name]}/ping"
}
router w
router_ready w
R=${RU[w]}

# batch I DAY: 200 rows of acme (ids I*200..), one insert; prints the HTTP status
batch() {
    local i=$1 day=$2
    seq $((i * 200)) $((i * 200 + 199)) | awk -v d="$day" '{printf "acme\t%s\t%d\t%d\tv%d\n", d, $1 % 97, $1, $1}' >"$T/batch.tsv"
    curl -sS -m 60 -D "$T/last.hdr" -o "$T/last.body" -w '%{http_code}' --data-binary @"$T/batch.tsv" \
        "$R/?query=$(jq -rn --arg q 'INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV' '$q|@uri')&insert_deduplication_token=acme-b$i"
}
count() { chq "$1" "SELECT count() FROM events WHERE tenant = 'acme'"; }
for i in 0 1 2 3; do assert_eq 200 "$(batch "$i" 20261110)" "batch $i accepted"; done
for n in "$A" "$B"; do assert_eq 800 "$(count "${U[$n]}")" "800 rows on $n"; done
ok "rf = 2 on $B (first in route order) and $A: writes reach both"

# ---- B killed: writes acknowledged by A alone, then B back with fewer rows ----------------------
kill -KILL "$(lab_pid "$L" "$B")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$B]}/ping >/dev/null"
for i in $(seq 4 9); do
    code=$(batch "$i" 20261111)
    [ "$code" = 200 ] || fail "batch $i with $B down: HTTP $code: $(cat "$T/last.body")"
done
total=2000
assert_eq "$total" "$(count "${U[$A]}")" "every acknowledged row on $A"
"$FERRY_BIN" status --config "$C" --json >"$T/st.json" || fail "ferry status"
assert_eq "acme 0 $B" "$(jq -r '.repair_needed[] | "\(.tenant) \(.split) \(.missed)"' "$T/st.json")" "the slice is recorded: $B missed writes"
if [ "${REPLICAS_CATALOG:-sqlite}" = sqlite ]; then
    # the index of open needs a router's full load lists (docs/catalog.md): a copy of the record
    db=$(sed -n 's#^catalog = sqlite:##p' "$C")
    assert_eq "repair-need.acme.0" "$(sqlite3 "$db" "SELECT name FROM records WHERE parent = 'indexes/repair_needs'")" "the record's copy in the index of open needs"
    assert_eq 1 "$(sqlite3 "$db" "SELECT count(*) FROM records WHERE parent = 'indexes' AND name = 'repair_needs_built'")" "the index is marked complete"
fi
lab_up "$L"
U[$B]=$(lab_url "$L" "$B")
wait_for 60 curl -sf "${U[$B]}/ping"
assert_eq 800 "$(count "${U[$B]}")" "$B is back with only the 800 rows it took"
ok "$B missed 1200 acknowledged rows and is up again"

# ---- every load_balancing policy: no read goes to B ----------------------------------------------
POLICIES="random nearest_hostname hostname_levenshtein_distance hostname_longest_common_prefix hostname_longest_common_suffix in_order first_or_random round_robin least_request"
for p in $POLICIES; do router "$p" "load_balancing = $p"; done
for p in $POLICIES; do router_ready "$p"; done
# the writing router learnt the record through its routing reload too
queries() { curl -sf "$1/ferry/router" | jq -r --arg s "$2" '.reads.shards[$s].queries'; }
rq() { curl -sS -m 60 "$1/" --data-binary "$2"; }
reads=0
for p in w $POLICIES; do
    for k in $(seq 1 12); do
        case $((k % 3)) in
        0) q="SELECT count() FROM events WHERE tenant = 'acme'"; want=$total ;;
        1) q="SELECT uniqExact(id) FROM events WHERE tenant = 'acme' AND day = 20261111"; want=1200 ;;
        2) q="SELECT sum(id) FROM events WHERE tenant = 'acme'"; want=$((total * (total - 1) / 2)) ;;
        esac
        assert_eq "$want" "$(rq "${RU[$p]}" "$q")" "$p read $k: every acknowledged row"
        reads=$((reads + 1))
    done
    assert_eq 0 "$(queries "${RU[$p]}" "$B")" "$p: no query went to $B"
    [ "$(queries "${RU[$p]}" "$A")" -ge 12 ] || fail "$p: the reads did not go to $A"
done
ok "$reads reads through routers of every load_balancing policy: each had all $total rows, none went to $B"

# ---- A down: fall back to B (said in the log and the metric), or refuse -------------------------
router strict "load_balancing = in_order" "fallback_to_stale_replicas = false"
router_ready strict
kill -KILL "$(lab_pid "$L" "$A")"
wait_for 30 sh -c "! curl -s -m 1 ${U[$A]}/ping >/dev/null"
assert_eq 800 "$(rq "${RU[in_order]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "with $A down the read falls back to $B (the rows it has)"
grep -q "reading a replica that missed acknowledged writes" "$T/router-in_order.log" || fail "the fallback read was not logged"
assert_eq 1 "$(curl -sf "${RU[in_order]}/ferry/router" | jq -r '.reads.stale_reads')" "one stale read counted"
metrics=$(curl -sf "${RU[in_order]}/metrics") || fail "the router's /metrics did not answer"
grep -q '^ferry_router_stale_replica_reads_total{outcome="read"} 1' <<<"$metrics" || fail "the metric does not count the stale read"
out=$(rq "${RU[strict]}" "SELECT count() FROM events WHERE tenant = 'acme'")
assert_contains "$out" "no replica of slice acme/0 could be reached" "fallback_to_stale_replicas = false: the read fails rather than reading $B"
assert_eq 0 "$(queries "${RU[strict]}" "$B")" "the strict router sent nothing to $B"
ok "$A down: the default router reads $B and says so; fallback_to_stale_replicas = false refuses"

# ---- each replica missed some writes: no up-to-date one -------------------------------------------
for i in 10 11; do
    code=$(batch "$i" 20261112)
    [ "$code" = 200 ] || fail "batch $i with $A down: HTTP $code: $(cat "$T/last.body")"
done
total=2400
"$FERRY_BIN" status --config "$C" --json >"$T/st.json" || fail "ferry status"
assert_eq "$A,$B|" "$(jq -r '.repair_needed[] | "\(.missed | split(",") | sort | join(","))|\(.held)"' "$T/st.json" | sed "s/^$B,$A|/$A,$B|/")" "the record names both replicas, none took every write"
lab_up "$L"
U[$A]=$(lab_url "$L" "$A")
wait_for 60 curl -sf "${U[$A]}/ping"
stale_before=$(curl -sf "${RU[in_order]}/ferry/router" | jq -r '.reads.stale_reads')
got=$(rq "${RU[in_order]}" "SELECT count() FROM events WHERE tenant = 'acme'")
[ "$got" = 2000 ] || [ "$got" = 1200 ] || fail "the fallback read answered $got rows: neither replica's count"
assert_eq $((stale_before + 1)) "$(curl -sf "${RU[in_order]}/ferry/router" | jq -r '.reads.stale_reads')" "the read of a replica that missed writes is counted"
grep -q 'every replica of the slice missed writes' "$T/router-in_order.log" || fail "the fallback with no up-to-date replica was not logged"
sa=$(queries "${RU[strict]}" "$A"); sb=$(queries "${RU[strict]}" "$B")
curl -sS -m 60 -D "$T/strict.hdr" -o "$T/strict.body" "${RU[strict]}/" --data-binary "SELECT count() FROM events WHERE tenant = 'acme'" || true
assert_contains "$(cat "$T/strict.body")" "ALL_REPLICAS_ARE_STALE" "fallback_to_stale_replicas = false: refused as ClickHouse does"
assert_contains "$(cat "$T/strict.body")" "Code: 369." "with ClickHouse's code"
assert_contains "$(tr -d '\r' <"$T/strict.hdr" | grep -i '^x-clickhouse-exception-code')" "369" "and its header"
assert_eq "$sa $sb" "$(queries "${RU[strict]}" "$A") $(queries "${RU[strict]}" "$B")" "the refused read sent nothing to either replica"
assert_eq 1 "$(curl -sf "${RU[strict]}/ferry/router" | jq -r '.reads.stale_refused')" "the refusal is counted"
ok "each replica missed some writes: the default router reads one ($got rows) and says so, the strict one refuses (ALL_REPLICAS_ARE_STALE)"

# ---- repair: B is read again --------------------------------------------------------------------
"$FERRY_BIN" repair --config "$C" --grace 500 --json >"$T/rep.json" 2>"$T/rep.err" || fail "repair failed: $(tail -5 "$T/rep.json" "$T/rep.err")"
assert_eq 0 "$("$FERRY_BIN" status --config "$C" --json | jq '.repair_needed | length')" "nothing awaits repair"
[ "${REPLICAS_CATALOG:-sqlite}" = zk ] || assert_eq 0 "$(sqlite3 "$db" "SELECT count(*) FROM records WHERE parent = 'indexes/repair_needs'")" "the index entry went with the record"
for n in "$A" "$B"; do assert_eq "$total" "$(count "${U[$n]}")" "$n holds every row after the repair"; done
# the routers take the cleared record through their routing reload (in_order prefers B now)
before=$(queries "${RU[in_order]}" "$B")
for i in $(seq 1 100); do
    got=$(rq "${RU[in_order]}" "SELECT count() FROM events WHERE tenant = 'acme'")
    [ "$(queries "${RU[in_order]}" "$B")" -gt "$before" ] && break
    sleep 0.3
done
[ "$(queries "${RU[in_order]}" "$B")" -gt "$before" ] || fail "in_order never read $B again after the repair"
assert_eq "$total" "$got" "the read $B answered after the repair has every row"
ok "after ferry repair the routers read $B again"

for p in w strict $POLICIES; do kill -TERM "${RP[$p]}" 2>/dev/null || true; done
done_testing
