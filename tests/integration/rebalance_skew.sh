# A skewed cluster evened by the coordinator alone (issue 22, [autopilot] skew): a 3-node lab
# whose shards have a capacity, 16 tenants of about equal size of which 12 live on node1 (fill
# about 0.45 against 0.08: the capacity is chosen so the mean fill is 0.2). The plan without a
# skew moves nothing (every shard is under the fill target 0.85); `ferry rebalance --dry-run
# --skew 0.2` plans moves off node1 only, placed by a fill target of 0.3. Then a `ferry
# coordinator` with rebalance_interval = 1s and skew = 0.2, and no command of the test, runs
# them: its log names the spread as the reason, every tenant keeps its rows and lives only where
# it is routed, nothing is left behind, the moved tenants are those of the dry run, the spread is
# under the skew (the slices went to node2 and node3, the emptier first) and the plan with the
# skew is empty afterwards.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 3
mv_conf "$L"
C="$L/mv.conf"
declare -A URL
for n in node1 node2 node3; do
    URL[$n]=$(lab_url "$L" $n)
    chq "${URL[$n]}" "$MV_DDL" >/dev/null
done
for i in $(seq -w 1 16); do
    n=node1
    [ "$i" -le 12 ] || n=node$((2 + (10#$i - 13) / 2))
    mv_ingest "${URL[$n]}" "t$i" 0 3 4000 "$i"
done
total=0
for n in node1 node2 node3; do
    total=$((total + $(chq "${URL[$n]}" "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'events'")))
done
cap=$((total * 10 / 6)) # mean fill 0.2 over the three shards
sed -i "/^\[shard \"node[0-9]*\"\]\$/a capacity = $cap" "$C"
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
before=$(mv_tenant_fps node1 node2 node3)
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan0.json" || fail "dry run failed"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan0.json")" "no skew given: nothing to move"
assert_eq 12 "$("$FERRY_BIN" catalog export --config "$C" | jq '[.routes[] | select(.shards == "node1")] | length')" "12 tenants routed to node1"
ok "16 tenants, 12 on node1; capacity $cap bytes a shard; no move without a skew"

"$FERRY_BIN" rebalance --config "$C" --dry-run --skew 0.2 --json >"$T/plan.json" || fail "dry run --skew failed"
P=$(jq -c 'select(.event == "plan")' "$T/plan.json")
assert_eq true "$(jq .evened <<<"$P")" "the spread is above the skew: $P"
jq -e '.spread > 0.3 and .fill > 0.29 and .fill < 0.31' <<<"$P" >/dev/null || fail "spread and fill target: $P"
want=$(jq -r '.moves[] | "\(.tenant) \(.from) \(.to)"' <<<"$P" | sort)
[ -n "$want" ] || fail "nothing planned with --skew 0.2: $P"
jq -e '.moves[] | select(.from != "node1")' <<<"$P" >/dev/null && fail "a move not off node1: $P"
ok "--skew 0.2: spread $(jq .spread <<<"$P"), placed by fill $(jq .fill <<<"$P"): $(wc -l <<<"$want") moves off node1"

cp "$C" "$T/coord.conf"
printf '\n[autopilot]\nrebalance_interval = 1s\nskew = 0.2\nmax_moves = 2\n' >>"$T/coord.conf"
bg_start "$T/coord.log" "$FERRY_BIN" coordinator --config "$T/coord.conf" --listen 127.0.0.1:0 \
    --port-file "$T/coord.port"
COORD_PID=$BG_PID
wait_for 60 test -s "$T/coord.port" || fail "coordinator did not start: $(tail -5 "$T/coord.log")"
unfinished() { sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }
evened() {
    [ "$(unfinished)" = 0 ] &&
        "$FERRY_BIN" rebalance --config "$C" --dry-run --skew 0.2 --json >"$T/plan2.json" &&
        [ "$(jq -r 'select(.event == "plan") | .moved' "$T/plan2.json")" = 0 ]
}
wait_for 180 evened || fail "the coordinator did not even the cluster: $(grep -i rebalance "$T/coord.log" | tail -5)"
kill "$COORD_PID"
wait_for 30 sh -c "! kill -0 $COORD_PID" || fail "coordinator did not stop"
grep -q 'autopilot rebalance starts.*reason=".*fill spread .* above skew 0.20' "$T/coord.log" ||
    fail "the coordinator's log names no spread: $(grep -i 'rebalance starts' "$T/coord.log" | tail -3)"
got=$("$FERRY_BIN" catalog export --config "$C" | jq -r '.routes[] | "\(.tenant) \(.shards)"' | sort)
while read -r t from to; do
    grep -q -x "$t $to" <<<"$got" || fail "$t is not on $to as the dry run planned: $(grep "^$t " <<<"$got")"
done <<<"$want"
assert_eq "$((12 - $(wc -l <<<"$want")))" "$(grep -c ' node1$' <<<"$got")" "node1 keeps the tenants not planned to move"
assert_eq "$before" "$(mv_tenant_fps node1 node2 node3)" "every tenant: the same rows and fingerprint"
mv_only_where_routed "$C" node1 node2 node3
mv_no_residue "$L"
P2=$(jq -c 'select(.event == "plan")' "$T/plan2.json")
jq -e '.spread <= 0.2' <<<"$P2" >/dev/null || fail "the spread is still above the skew: $P2"
ok "the coordinator alone moved the dry run's $(wc -l <<<"$want") tenants off node1 (spread now $(jq .spread <<<"$P2")); rows verified, no residue, nothing more planned"
done_testing
