# Re-weighting a shard that is already in service: on a 3-node lab with 24 tenants placed by
# `ferry place`, `ferry shard add node2 --weight 3` records the weight the routing table was
# balanced for (placed_weight 1, shown by `ferry status`) and prints exactly the moves `ferry
# plan` computes from weights 1,1,1 to 1,3,1, all onto node2; `ferry rebalance` runs them, every
# slice keeps its rows and lives only where it is routed, nothing is left behind, nothing more is
# planned and placed_weight is gone. Then --weight 0.5 moves slices off node2 only, checked the
# same way (not against `ferry plan`: its old layout would be a fresh placement by 1,3,1, which
# the splits-apart rule can make differ from the one the first rebalance left).
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 3
C="$L/mv.conf"
declare -A URL
for n in node1 node2 node3; do URL[$n]=$(lab_url "$L" $n); done
printf 'node1\t1\nnode2\t1\nnode3\t1\n' >"$T/w1.tsv"
printf 'node1\t1\nnode2\t3\nnode3\t1\n' >"$T/w3.tsv"
mv_place_tenants "$L" "$T/w1.tsv" 24
before=$(mv_tenant_fps node1 node2 node3)
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan0.json" || fail "dry run failed"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan0.json")" "placed as ferry place: nothing to move"
ok "24 tenants, $(wc -l <"$T/slices.tsv") slices placed on 3 nodes of weight 1"

placed_weight() {
    "$FERRY_BIN" catalog export --config "$C" | jq -r '.shards[] | select(.name == "node2") | .placed_weight // "none"'
}

# reweight FROM_TSV TO_TSV WEIGHT SIDE: `ferry shard add node2 --weight WEIGHT` prints moves, each
# with node2 on SIDE (to or from), and with FROM_TSV ferry plan's moves from it to TO_TSV; the
# rebalance runs them and leaves every slice with its rows, where it is routed, and node2 balanced
# for WEIGHT.
reweight() {
    local from=$1 to=$2 weight=$3 side=$4 was want got S
    was=$(jq -r '.shards[] | select(.name == "node2") | .weight' <("$FERRY_BIN" status --config "$C" --json))
    "$FERRY_BIN" shard add node2 --weight "$weight" --config "$C" --json >"$T/add-$weight.json" ||
        fail "shard add --weight $weight: $(cat "$T/add-$weight.json")"
    assert_eq "$(jq -n "$was")" "$(jq -n "$(placed_weight)")" "node2 keeps the weight it was balanced for ($was)"
    "$FERRY_BIN" status --config "$C" >"$T/status-$weight.txt" || fail "ferry status failed"
    assert_contains "$(cat "$T/status-$weight.txt")" "re-weighted from" "ferry status shows the re-weight"
    got=$(jq -r '.moves[] | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/add-$weight.json" | sort)
    want=$got
    if [ -n "$from" ]; then
        "$FERRY_BIN" catalog export --config "$C" | jq -r '.slices[] | "\(.tenant)\t\(.split)\t\(.bytes)"' >"$T/cat_slices.tsv"
        "$FERRY_BIN" plan --slices "$T/cat_slices.tsv" --from "$from" --to "$to" --json >"$T/plan-$weight.json" ||
            fail "ferry plan failed"
        want=$(jq -r '.moves[] | "\(.tenant) \(.split) \(.from) \(.to)"' "$T/plan-$weight.json" | sort)
        assert_eq "$want" "$got" "shard add --weight $weight prints ferry plan's moves"
    fi
    [ -n "$want" ] || fail "nothing planned for node2 at weight $weight: the test needs moves"
    jq -e --arg s "$side" '.moves[] | select(.[$s] != "node2")' "$T/add-$weight.json" >/dev/null &&
        fail "a move at weight $weight does not have node2 as its $side"
    ok "node2 --weight $weight: $(wc -l <<<"$want") moves${from:+, as ferry plan has them}, all with node2 as $side"

    "$FERRY_BIN" rebalance --config "$C" --max-parallel 2 --grace 0 --json >"$T/rb-$weight.json" 2>"$T/rb-$weight.err" ||
        fail "rebalance failed: $(tail -5 "$T/rb-$weight.err")"
    S=$(jq -c 'select(.event == "summary")' "$T/rb-$weight.json")
    assert_eq "$(wc -l <<<"$want")" "$(jq .moves <<<"$S")" "every planned move done"
    assert_eq 0 "$(jq .failed <<<"$S")" "no move failed"
    assert_eq "$before" "$(mv_tenant_fps node1 node2 node3)" "every slice: the same rows and fingerprint"
    mv_only_where_routed "$C" node1 node2 node3
    mv_no_residue "$L"
    "$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan-after-$weight.json"
    assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan-after-$weight.json")" "balanced: nothing left to move"
    assert_eq none "$(placed_weight)" "node2 balanced for its weight: placed_weight cleared"
    jq -e '.shards[] | select(.placed_weight)' <("$FERRY_BIN" status --config "$C" --json) >/dev/null &&
        fail "ferry status still shows a re-weight"
    ok "rebalance at weight $weight: rows verified, each slice only where routed, no residue, settled"
}

reweight "$T/w1.tsv" "$T/w3.tsv" 3 to
reweight "" "" 0.5 from
done_testing
