# `ferry rebalance --dry-run` plans with the sizes the servers report and records none of them
# (ferry_inventory_sync_dry, issue 22): a 2-node lab, 6 tenants on node1 (merges stopped, so the
# sizes hold still). The first dry run records the tenants, slices and routes it finds, with their
# sizes. Then every tenant grows. A second dry run's plan carries each slice's new size from
# system.parts (per move, and in its total) while the catalog keeps the sizes of the first run;
# the real `ferry rebalance` then prints the same plan, records the new sizes, and moves every
# row where it was planned.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 2
C="$L/mv.conf"
declare -A URL
for n in node1 node2; do URL[$n]=$(lab_url "$L" $n); done
chq "${URL[node1]}" "SYSTEM STOP MERGES events" >/dev/null
for i in 1 2 3 4 5 6; do mv_ingest "${URL[node1]}" "t$i" 0 3 $((500 * i)) "$i"; done

# "tenant bytes" of every slice on node1, from system.parts (split 0 only here)
server_sizes() {
    chq "${URL[node1]}" "SELECT tenant, sum(b) FROM (SELECT _partition_id AS p, any(tenant) AS tenant FROM events GROUP BY p) AS t
        JOIN (SELECT partition_id AS p, sum(bytes_on_disk) AS b FROM system.parts WHERE active AND table = 'events' GROUP BY p) AS s USING p
        GROUP BY tenant ORDER BY tenant FORMAT TSV"
}
catalog_sizes() { "$FERRY_BIN" catalog export --config "$C" | jq -r '.slices[] | "\(.tenant)\t\(.bytes)"' | sort; }
plan_moves() { jq -r 'select(.event == "plan") | .moves[] | "\(.tenant)\t\(.bytes)\t\(.from)\t\(.to)"' "$1" | sort; }

"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan1.json" 2>"$T/plan1.err" ||
    fail "first dry run: $(tail -3 "$T/plan1.err")"
first=$(server_sizes)
assert_eq "$first" "$(catalog_sizes)" "the first dry run records the slices it finds, with their sizes"
[ -n "$(plan_moves "$T/plan1.json")" ] || fail "nothing planned to node2: $(cat "$T/plan1.json")"
ok "6 tenants on node1: the first dry run records them and plans $(plan_moves "$T/plan1.json" | wc -l) moves to node2"

for i in 1 2 3 4 5 6; do mv_ingest "${URL[node1]}" "t$i" 0 3 $((300 * i)) "$((i + 10))"; done
grown=$(server_sizes)
[ "$grown" != "$first" ] || fail "the tenants did not grow: $grown"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan2.json" 2>"$T/plan2.err" ||
    fail "second dry run: $(tail -3 "$T/plan2.err")"
assert_eq "$first" "$(catalog_sizes)" "the second dry run recorded no size"
want=$(plan_moves "$T/plan2.json")
while IFS=$'\t' read -r t b from to; do
    assert_eq "$(awk -v t="$t" '$1 == t {print $2}' <<<"$grown")" "$b" "$t's move in the dry run's plan: its size on node1 now"
done <<<"$want"
assert_eq "$(awk '{s += $2} END {print s}' <<<"$grown")" "$(jq -r 'select(.event == "plan") | .total_bytes' "$T/plan2.json")" \
    "the dry run's total: the servers' sizes now"
ok "every tenant grew: the second dry run plans with the new sizes and leaves the catalog's"

before=$(mv_tenant_fps node1 node2)
"$FERRY_BIN" rebalance --config "$C" --grace 0 --json >"$T/run.json" 2>"$T/run.err" ||
    fail "rebalance: $(tail -5 "$T/run.err")"
assert_eq "$want" "$(plan_moves "$T/run.json")" "the real run's plan is the dry run's, bytes and all"
assert_eq "$grown" "$(catalog_sizes)" "the real run records the new sizes"
assert_eq "$before" "$(mv_tenant_fps node1 node2)" "every tenant: the same rows and fingerprint"
mv_only_where_routed "$C" node1 node2
while IFS=$'\t' read -r t b from to; do
    assert_eq "$to" "$("$FERRY_BIN" route --config "$C" --tenant "$t" --split 0 --json | jq -r '.slices[0].shards[0]')" "$t routed where planned"
done <<<"$want"
ok "the real rebalance: the dry run's plan, the new sizes recorded, $(wc -l <<<"$want") tenants moved with their rows"
done_testing
