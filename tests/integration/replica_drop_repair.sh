# A replica is not dropped while a repair works on its slice, and a repair never writes to a
# replica dropped since it read the routes (the ZooKeeper soak of session 13: the coordinator's
# repair, started before `ferry rebalance` dropped t4/0's replica on node1, went on copying
# partitions onto node1 after the drop, so node1 held 31,941 rows of a slice it no longer served).
# rf 2 on two nodes, node2 missing two of acme's three days. A repair is stopped
# (FERRY_TEST_STOP_AFTER=SYNC:staged: it holds the slice's lease, node2's staging filled); the
# rf is lowered to 1 and the rebalance's drop is refused, naming the repair; the repair goes on
# and finishes; the drop then runs, and the dropped replica holds nothing of acme.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_acme "$L"
mv_ingest "$U1" acme 0 3 4000 # node1: 2026-11-01..03
mv_ingest "$U2" acme 0 1 4000 # node2: the first day only
route() { "$FERRY_BIN" route --config "$C" --tenant acme --json | jq -r '.slices[0].shards | sort | join(",")'; }
assert_eq "node1,node2" "$(route)" "acme on both nodes"

FERRY_TEST_STOP_AFTER=SYNC:staged "$FERRY_BIN" repair --config "$C" --tenant acme --grace 0 \
    >"$T/rep.out" 2>"$T/rep.err" &
RPID=$!
_H_PIDS+=("$RPID") # killed at exit if the test fails while it is stopped
stopped() { [ "$(awk '{print $3}' "/proc/$RPID/stat" 2>/dev/null)" = T ]; }
wait_for 120 stopped || fail "the repair did not stop at SYNC:staged: $(tail -5 "$T/rep.err")"

"$FERRY_BIN" tenant set-rf acme 1 --config "$C" >/dev/null || fail "set-rf acme 1"
if "$FERRY_BIN" rebalance --config "$C" --grace 0 --json >"$T/rb1.json" 2>"$T/rb1.err"; then
    kill -CONT "$RPID"
    fail "the drop ran while the repair held the slice: $(tail -3 "$T/rb1.err")"
fi
assert_contains "$(cat "$T/rb1.err" "$T/rb1.json")" "being repaired or tiered" "the drop is refused, saying why"
assert_eq "node1,node2" "$(route)" "the route is unchanged"
ok "a replica drop is refused while a repair holds the slice"

kill -CONT "$RPID"
wait "$RPID" || fail "the repair failed after it went on: $(tail -5 "$T/rep.err")"
assert_eq "$(mv_fp "$U1" acme 0)" "$(mv_fp "$U2" acme 0)" "the repair made node2 equal to node1"
"$FERRY_BIN" rebalance --config "$C" --grace 0 --json >"$T/rb2.json" 2>"$T/rb2.err" ||
    fail "the drop after the repair failed: $(tail -5 "$T/rb2.err")"
left=$(route)
case "$left" in node1 | node2) ;; *) fail "acme not on one shard after the drop: $left" ;; esac
gone=node1; [ "$left" = node1 ] && gone=node2
declare -A U=([node1]=$U1 [node2]=$U2)
assert_eq 0 "$(chq "${U[$gone]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$gone holds nothing of acme"
assert_eq 12000 "$(chq "${U[$left]}" "SELECT count() FROM events WHERE tenant = 'acme'")" "$left holds all 12,000 rows"
ok "after the repair the drop runs: acme on $left only, nothing left on $gone"
done_testing
