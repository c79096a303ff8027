# Adding and removing shards while a router runs (issue 16): a 3-node lab with 16 tenants (t3
# with 3 splits, t7 with 2), their older days tiered, a writer that retries failed batches with
# the same query_id, and a reader, both through one `ferry router` listed in [cluster] routers.
# Meanwhile `ferry lab add-node`, `ferry init` (the new shard) and `ferry rebalance` run; then a
# shard is drained, rebalanced off and removed. The router is never restarted: it learns node4
# from the catalog (usable before any route names it) and closes node2's connections once it is
# gone; every batch is stored exactly once (count, distinct ids and sum of ids per tenant), and
# every read during and after equals the reference.
# Catalog: SQLite; router_shard_add_zk.sh runs the same on ZooKeeper (SHARD_ADD_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"
LOAD="python3 $FERRY_SOURCE_DIR/tests/lib/router_load.py"
BACKEND=${SHARD_ADD_CATALOG:-sqlite}

L=$T/lab
lab_up "$L" --nodes 3
C=$L/sa.conf
CATALOG=""
if [ "$BACKEND" = zk ]; then
    zk_start
    CATALOG=$(zk_url /shardadd)
fi
ROUTERS=""
# the lab's config (its shards), the catalog of this run, the test's sections, the routers
write_conf() {
    cp "$L/ferry.conf" "$C"
    [ -z "$CATALOG" ] || sed -i "s#^catalog = .*#catalog = $CATALOG#" "$C"
    [ -z "$ROUTERS" ] || sed -i "s#^\[cluster\]\$#[cluster]\nrouters = $ROUTERS#" "$C"
    events_conf "$C" "passthrough = $(lab_url "$L" node1)" "shard_timeout = 30s" "route_wait = 30s"
}
write_conf
events_table --tiered $(for n in node1 node2 node3; do lab_url "$L" $n; done)
"$FERRY_BIN" init --config "$C" >/dev/null || fail "init"
"$FERRY_BIN" tenant add t3 --splits 3 --config "$C" >/dev/null || fail "tenant add t3"
"$FERRY_BIN" tenant add t7 --splits 2 --config "$C" >/dev/null || fail "tenant add t7"
"$FERRY_BIN" tenant add $(seq 0 15 | grep -vx '[37]' | sed 's/^/t/') --config "$C" >/dev/null ||
    fail "tenant add"
start_router "$C" router
R=$R_URL; ROUTER_PID=$R_PID
ROUTERS=$R
write_conf
grep -q "^routers = $R" "$C" || fail "routers line not written: $(head -5 "$C")"
ok "$BACKEND catalog: 3 shards, 16 tenants (19 slices), a router listed in [cluster] routers"

# ---- the older days: 2000 rows per tenant on 3 days a month ago, then tiered --------------
for i in $(seq 0 15); do
    res=$($LOAD send "$R" TSV "t$i" $((1000000 + i * 10000)) 2000 --query-id "static-$i")
    assert_eq 200 "$(head -1 <<<"$res")" "static rows of t$i: $res"
done
"$FERRY_BIN" tier --older-than 3d --config "$C" --json >"$T/tier.json" 2>"$T/tier.err" ||
    fail "tier: $(tail -3 "$T/tier.err")"
cold=0
for n in node1 node2 node3; do
    cold=$((cold + $(chq "$(lab_url "$L" $n)" "SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'cold'")))
done
[ "$cold" -gt 0 ] || fail "nothing was tiered: $(tail -3 "$T/tier.json")"
RQ_ALL="SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE day < 20261104 GROUP BY tenant ORDER BY tenant FORMAT TSV"
rq() { curl -sS --fail-with-body "$R/" --data-binary "$1"; }
REF_ALL=$(rq "$RQ_ALL")
assert_eq 16 "$(wc -l <<<"$REF_ALL")" "16 tenants in the reference"
while read -r t n u s; do
    i=${t#t}
    assert_eq "2000 2000 $((2000 * (1000000 + i * 10000) + 1999 * 1000))" "$n $u $s" "the older days of $t"
done <<<"$REF_ALL"
declare -A REF
for t in t3 t7 t11; do
    REF[$t]=$(rq "SELECT count(), sum(id), min(id), max(id) FROM events WHERE tenant = '$t' AND day < 20261104 FORMAT TSV")
done
ok "older days: 2000 rows per tenant through the router, $cold part(s) tiered; the reference read"

# A coordinator that tiers every 3 s, started with this config (which knows no node4): it must
# reach node4 through the catalog once node4 joins.
cp "$C" "$T/coord.conf"
sed -i "s#^\[cluster\]\$#[cluster]\ntier_interval = 3s#" "$T/coord.conf"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$T/coord.conf" --listen 127.0.0.1:0 \
    --port-file "$T/coord.port"
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(tail -5 "$T/coord.log")"

# ---- writer and reader run through the router from now on -----------------------------------
TODAY=$(date -u +%Y%m%d)
$LOAD load "$R" "$T/sent.json" --tenants 16 --rows 500 --clients 2 --until "$T/stop" \
    --retry 30 --formats TSV --days "$TODAY" --ids "$T/ids.txt" --stats "$T/stats.json" \
    2>"$T/load.err" &
LOADPID=$!
at_exit "touch $T/stop"
reader() {
    local k=0 q got
    while [ ! -e "$T/stop" ]; do
        k=$((k + 1))
        if ((k % 2)); then
            got=$(rq "$RQ_ALL" 2>&1) || true
            [ "$got" = "$REF_ALL" ] && echo ok || echo "bad all: $(head -c 400 <<<"$got")"
        else
            for t in t3 t7 t11; do
                got=$(rq "SELECT count(), sum(id), min(id), max(id) FROM events WHERE tenant = '$t' AND day < 20261104 FORMAT TSV" 2>&1) || true
                [ "$got" = "${REF[$t]}" ] && echo ok || echo "bad $t: $(head -c 400 <<<"$got")"
            done
        fi
    done >>"$T/reads.txt"
}
: >"$T/reads.txt"
reader 2>"$T/reader.err" &
READPID=$!
wait_for 60 test -s "$T/sent.json" -o -s "$T/reads.txt"
sleep 2

# ---- a 4th node joins: lab add-node, ferry init, ferry rebalance --------------------------
"$FERRY_BIN" lab add-node --dir "$L" >/dev/null 2>&1 || fail "lab add-node failed"
write_conf
N4=$(lab_url "$L" node4)
events_table --tiered "$N4"
"$FERRY_BIN" init --config "$C" --json >"$T/init.json" || fail "init with node4: $(cat "$T/init.json")"
assert_eq 1 "$(jq .shards_added "$T/init.json")" "ferry init added one shard"
status() { curl -sf "$R/ferry/router"; }
wait_for 30 bash -c "curl -sf '$R/ferry/router' | jq -e '.shards.node4.usable' >/dev/null" ||
    fail "the router did not take node4 from the catalog: $(status | jq -c .shards)"
ok "node4 joined (lab add-node, ferry init): the running router lists it usable, no restart"
"$FERRY_BIN" rebalance --config "$C" --max-parallel 2 --grace 300 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "rebalance: $(grep -v progress "$T/rb.json" | tail -3) $(tail -3 "$T/rb.err")"
S=$(jq -c 'select(.event == "summary")' "$T/rb.json")
moved=$(jq -s '[.[] | select(.event == "move" and .state == "DONE" and .to == "node4")] | length' "$T/rb.json")
[ "$moved" -gt 0 ] || fail "no slice moved to node4: $S"
assert_eq 0 "$(jq .failed <<<"$S")" "no move failed"
sleep 2
kill -0 "$ROUTER_PID" || fail "the router died"
on4=$(chq "$N4" "SELECT count() FROM events")
[ "$on4" -gt 0 ] || fail "node4 holds no rows after the rebalance"
ok "rebalance moved $moved slice(s) to node4 while the writer and reader ran ($on4 rows there now)"

# The coordinator (started before node4 existed) tiers an older day that lands on node4 now.
T4=$(chq "$N4" "SELECT any(tenant) FROM events")
[ -n "$T4" ] || fail "no tenant on node4"
res=$($LOAD send "$R" TSV "$T4" 5000000 300 --query-id "late-$T4" --day 20261105)
assert_eq 200 "$(head -1 <<<"$res")" "older rows of $T4: $res"
# the coordinator may be tiering that day on node4 right now, and its swap (DETACH PART, then
# ATTACH FROM staging, in one ALTER) hides the day's rows between the two commands
# (docs/tiering.md, "The windows"): a count of 0 is looked at again
late4_on() { late4=$(chq "$N4" "SELECT count() FROM events WHERE day = 20261105"); [ "$late4" -gt 0 ]; }
wait_for 10 late4_on || fail "none of $T4's rows of 20261105 went to node4"
wait_for 60 bash -c "[ \$(curl -s '$N4' --data-binary \"SELECT count() FROM system.parts WHERE table = 'events' AND active AND disk_name = 'default' AND partition LIKE '%20261105%'\") = 0 ]" ||
    fail "the coordinator did not tier node4's older parts: $(grep -i tier "$T/coord.log" | tail -3)"
ok "the coordinator (its config knows no node4) tiered node4's older parts ($late4 rows) through the catalog"

# ---- a shard leaves: drain node2, rebalance, remove ---------------------------------------
"$FERRY_BIN" shard drain node2 --config "$C" >/dev/null || fail "shard drain node2"
"$FERRY_BIN" rebalance --config "$C" --max-parallel 2 --grace 300 --json >"$T/rb2.json" 2>"$T/rb2.err" ||
    fail "rebalance (drain): $(grep -v progress "$T/rb2.json" | tail -3) $(tail -3 "$T/rb2.err")"
assert_eq 0 "$(jq -s '[.[] | select(.event == "summary")][0].failed' "$T/rb2.json")" "no move of the drain failed"
"$FERRY_BIN" shard remove node2 --config "$C" >/dev/null || fail "shard remove node2"
wait_for 30 bash -c "curl -sf '$R/ferry/router' | jq -e '.shards | has(\"node2\") | not' >/dev/null" ||
    fail "the router still lists node2: $(status | jq -c .shards)"
grep -q 'shard connections closed.*shard=node2' "$T/router.log" || fail "no close of node2's connections logged"
ok "node2 drained, its slices moved, removed: the router closed its connections (no restart)"
sleep 2

# ---- the end: every batch once, every read exact -------------------------------------------
touch "$T/stop"
wait "$LOADPID" || fail "the writer gave up: $(cat "$T/load.err") $(cat "$T/stats.json" 2>/dev/null)"
wait "$READPID" || true
kill -0 "$ROUTER_PID" || fail "the router died"
echo "# writer: $(cat "$T/stats.json")"
batches=$(jq .batches "$T/stats.json")
[ "$batches" -ge 20 ] || fail "only $batches batches were written during the scenario"
nreads=$(grep -c . "$T/reads.txt")
nbad=$(grep -vc '^ok$' "$T/reads.txt" || true)
[ "$nbad" = 0 ] || fail "$nbad of $nreads reads differed from the reference: $(grep -v '^ok$' "$T/reads.txt" | head -3)"
[ "$nreads" -ge 10 ] || fail "only $nreads reads ran: $(tail -5 "$T/reader.err")"
want=$(jq -r 'to_entries | sort_by(.key)[] | "\(.key) \(.value[0]) \(.value[1])"' "$T/sent.json")
got=$(rq "SELECT tenant, count(), uniqExact(id), sum(id) FROM events WHERE day = $TODAY GROUP BY tenant ORDER BY tenant FORMAT TSV" |
    awk '{ if ($2 != $3) print "DUPLICATE", $0; else print $1, $2, $4 }')
assert_eq "$want" "$got" "rows written during the scenario, per tenant: count, sum of ids (and no id twice)"
total=0
for n in node1 node2 node3 node4; do
    total=$((total + $(chq "$(lab_url "$L" $n)" "SELECT count() FROM events WHERE day = $TODAY")))
done
assert_eq "$(jq '[.[] | .[0]] | add' "$T/sent.json")" "$total" "no copy left behind on any node"
assert_eq "$REF_ALL" "$(rq "$RQ_ALL")" "the older days after both rebalances"
ok "$batches batches ($(jq .retried "$T/stats.json") retried) stored exactly once; $nreads reads during the changes, all exact; same router process throughout"
done_testing
