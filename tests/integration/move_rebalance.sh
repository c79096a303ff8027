# Rebalancing a 3-node lab with a few dozen tenants after adding a 4th node: `ferry shard add`
# prints the plan, `ferry rebalance` runs exactly the moves `ferry plan` computes for the same
# slices (2 at a time) while a writer keeps inserting into one moving slice through the routing
# table; afterwards every tenant's rows and fingerprint are what was ingested plus what the
# writer sent, each slice lives only on its routed shard, and nothing is left behind.
# Then draining a shard moves everything off it, and removing it is refused until it is empty.
# Catalog: SQLite; move_rebalance_zk.sh runs the same on ZooKeeper (MOVE_CATALOG=zk).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"
source "$FERRY_SOURCE_DIR/tests/lib/zookeeper.sh"

if [ "${MOVE_CATALOG:-sqlite}" = zk ]; then
    zk_start
    MV_CATALOG=$(zk_url /moverebalance)
fi
L=$T/lab
mv_setup "$L" 3
C="$L/mv.conf"
declare -A URL
for n in node1 node2 node3; do URL[$n]=$(lab_url "$L" $n); done

# 30 tenants with 1-3 splits, placed by `ferry place` on the 3 nodes
printf 'node1\t1\nnode2\t1\nnode3\t1\n' >"$T/3.tsv"
printf 'node1\t1\nnode2\t1\nnode3\t1\nnode4\t1\n' >"$T/4.tsv"
mv_place_tenants "$L" "$T/3.tsv" 30
tenant_fps() { mv_tenant_fps node1 node2 node3 ${URL[node4]:+node4}; }
before=$(tenant_fps)
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan0.json"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan0.json")" "placed as ferry place: nothing to move"
ok "30 tenants, $(wc -l <"$T/slices.tsv") slices placed on 3 nodes; rebalance plans nothing"

# a 4th node
"$FERRY_BIN" lab add-node --dir "$L" >/dev/null 2>&1 || fail "lab add-node failed"
mv_conf "$L"
URL[node4]=$(lab_url "$L" node4)
chq "${URL[node4]}" "$MV_DDL" >/dev/null
"$FERRY_BIN" shard add node4 --config "$C" --json >"$T/add.json" || fail "shard add failed"
assert_eq new "$(jq -r .state "$T/add.json")" "node4 new (active after its first rebalance)"
# ferry plan over the catalog's own slice sizes
"$FERRY_BIN" catalog export --config "$C" | jq -r '.slices[] | "\(.tenant)\t\(.split)\t\(.bytes)"' >"$T/cat_slices.tsv"
"$FERRY_BIN" plan --slices "$T/cat_slices.tsv" --from "$T/3.tsv" --to "$T/4.tsv" --json >"$T/plan.json"
want=$(jq -r '.moves[] | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/plan.json" | sort)
got=$(jq -r '.moves[] | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/add.json" | sort)
[ -n "$want" ] || fail "ferry plan moves nothing to node4"
assert_eq "$want" "$got" "shard add prints ferry plan's moves"
ok "shard add node4: plan of $(wc -l <<<"$want") moves, the same as ferry plan"

# a rebalance cut short: one of the planned moves done alone; node4 is still new, and the plan
# keeps the rest (it planned nothing once node4 served a route, before the added state counted)
read -r ht hs hf hto <<<"$(tail -1 <<<"$want")"
"$FERRY_BIN" move --tenant "$ht" --split "$hs" --to "$hto" --grace 0 --config "$C" >/dev/null 2>"$T/hand.err" ||
    fail "move $ht/$hs by hand: $(tail -3 "$T/hand.err")"
rest=$(grep -v -x -F "$ht $hs $hf $hto" <<<"$want")
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan_rest.json"
got=$(jq -r 'select(.event == "plan") | .moves[] | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/plan_rest.json" | sort)
assert_eq "$rest" "$got" "after one move to the new node4 the plan is the rest of its first one"
want=$rest
ok "one move done alone ($ht/$hs to $hto): the plan keeps the other $(wc -l <<<"$want")"

# a writer on one moving slice, following the routing table before every batch
read -r wt ws _ _ <<<"$(head -1 <<<"$want")"
writer() {
    local i=0 sent=0 shard
    while [ ! -e "$T/stop" ]; do
        shard=$("$FERRY_BIN" route --config "$C" --tenant "$wt" --split "$ws" --json | jq -r '.slices[0].shards[0]')
        curl -sS --fail "${URL[$shard]}/" --data-binary "INSERT INTO events SELECT '$wt', 20261103, $ws,
            1000000 + $i * 10 + number, number FROM numbers(10)" >/dev/null || exit 1
        i=$((i + 1)); sent=$((sent + 10)); echo "$sent" >"$T/sent"
        sleep 0.05
    done
}
writer & WPID=$!
sleep 0.5
"$FERRY_BIN" rebalance --config "$C" --max-parallel 2 --grace 300 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "rebalance failed: $(tail -5 "$T/rb.err")"
touch "$T/stop"; wait "$WPID" || fail "writer failed"
sent=$(cat "$T/sent")
S=$(jq -c 'select(.event == "summary")' "$T/rb.json")
assert_eq "$(wc -l <<<"$want")" "$(jq .moves <<<"$S")" "every planned move done"
assert_eq 0 "$(jq .failed <<<"$S")" "no move failed"
done_moves=$(jq -r 'select(.event == "move") | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/rb.json" | sort)
assert_eq "$want" "$done_moves" "the moves done are ferry plan's"
jq -e 'select(.event == "move") | select(.state != "DONE")' "$T/rb.json" >/dev/null && fail "a move is not DONE"
ok "rebalance: $(jq .moves <<<"$S") moves with 2 in parallel, writer sent $sent rows meanwhile"

# every tenant as before (plus the writer's rows), each slice only where it is routed
after=$(tenant_fps | awk -v t="$wt" -v s="$ws" '!($1 == t && $2 == s)')
assert_eq "$(awk -v t="$wt" -v s="$ws" '!($1 == t && $2 == s)' <<<"$before")" "$after" "every other slice: same rows and fingerprint"
wrows=$(grep -P "^$wt\t$ws\t" <<<"$before" | cut -f3)
wshard=$("$FERRY_BIN" route --config "$C" --tenant "$wt" --split "$ws" --json | jq -r '.slices[0].shards[0]')
assert_eq "$((wrows + sent))" "$(chq "${URL[$wshard]}" "SELECT count() FROM events WHERE tenant = '$wt' AND split = $ws")" "$wt/$ws: ingested + the writer's $sent rows"
assert_eq "$sent" "$(chq "${URL[$wshard]}" "SELECT uniqExact(user) FROM events WHERE tenant = '$wt' AND split = $ws AND user >= 1000000")" "writer rows once"
mv_only_where_routed "$C" node1 node2 node3 node4
[ "$(chq "${URL[node4]}" "SELECT uniqExact(tenant, split) FROM events")" = "$(($(wc -l <<<"$want") + 1))" ] || fail "node4 holds other slices than the planned ones"
mv_no_residue "$L"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan2.json"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan2.json")" "balanced: nothing left to move"
ok "every tenant verified, each slice only on its routed shard, no residue, nothing left to move"

# drain node3, remove refused until it is empty, then accepted
expect_exit 2 "$FERRY_BIN" shard remove node3 --config "$C"
assert_contains "$ERR" "still serves" "remove refused while serving"
"$FERRY_BIN" shard drain node3 --config "$C" --json >"$T/drain.json" || fail "drain failed"
[ "$(jq .moved "$T/drain.json")" -gt 0 ] || fail "draining plans no move"
jq -e '.moves[] | select(.from != "node3")' "$T/drain.json" >/dev/null && fail "drain plan moves slices of other shards"
"$FERRY_BIN" rebalance --config "$C" --grace 100 >"$T/rb2.out" 2>"$T/rb2.err" || fail "drain rebalance failed: $(tail -3 "$T/rb2.err")"
assert_eq 0 "$(chq "$(lab_url "$L" node3)" "SELECT count() FROM events")" "node3 empty"
"$FERRY_BIN" shard remove node3 --config "$C" >/dev/null || fail "remove after drain failed"
assert_eq "$(awk '{print $1, $2, $3}' <<<"$before" | sort | grep -v "^$wt $ws ")" \
    "$(tenant_fps | awk '{print $1, $2, $3}' | sort | grep -v "^$wt $ws ")" "rows per slice after draining"
expect_exit 2 "$FERRY_BIN" shard add node9 --config "$C"
assert_contains "$ERR" "no [shard \"node9\"]" "unknown shard to add"
ok "drain moves everything off node3; remove refused while it served, accepted after"
done_testing
