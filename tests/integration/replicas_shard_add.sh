# An added shard attracts replicas of slices with rf = 2, as placement's rule 4 moves slices of
# rf 1 (docs/placement.md): a 2-node lab where every slice of 8 tenants has its 2 replicas (a
# cold day each), then node3 joins. The rebalance moves one replica of each slice that now ranks
# node3 among its two best shards (its weaker one), and only those; afterwards every slice has 2
# replicas with the rows it had (per-partition fingerprints on both), the replica that moved
# left nothing on its old shard, nothing else is planned and node3 is active.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_rf2_setup "$L"
C=$L/rf2.conf
TENANTS="a0 a1 a2 a3 a4 a5 a6 a7"
declare -A FP
# shellcheck disable=SC2086 # the tenants' names, one word each
"$FERRY_BIN" tenant add $TENANTS --config "$C" >/dev/null || fail "tenant add"
i=0
for t in $TENANTS; do
    i=$((i + 1))
    for u in "$U1" "$U2"; do mv_ingest "$u" "$t" 0 2 $((3000 + 500 * i)) "$i"; done
    for u in "$U1" "$U2"; do
        chq "$u" "ALTER TABLE events MOVE PARTITION ('$t', 20261101, 0) TO DISK 'cold'" >/dev/null
    done
    FP[$t]=$(mv_fp "$U1" "$t" 0)
    assert_eq "${FP[$t]}" "$(mv_fp "$U2" "$t" 0)" "$t: both replicas equal before"
done
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan0.json" || fail "dry run"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan0.json")" "rf 2 on 2 nodes: nothing to plan"
route_of() { "$FERRY_BIN" route --config "$C" --tenant "$1" --json | jq -r '.slices[0].shards | sort | join(",")'; }
for t in $TENANTS; do assert_eq "node1,node2" "$(route_of "$t")" "$t on both nodes"; done
ok "8 tenants with rf 2 on node1 and node2, a cold day each"

# node3 joins
"$FERRY_BIN" lab add-node --dir "$L" >/dev/null 2>&1 || fail "lab add-node failed"
mv_rf2_conf "$L"
U3=$(lab_url "$L" node3)
chq "$U3" "$MV_DDL" >/dev/null
"$FERRY_BIN" shard add node3 --config "$C" --json >"$T/add.json" || fail "shard add failed"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan.json" || fail "dry run after add"
steps=$(jq -r 'select(.event == "plan") | .moves[] | "\(.kind) \(.tenant) \(.split) \(.from) \(.to)"' "$T/plan.json" | sort)
# expected: a slice whose two best shards of node1..3 include node3 gives up its weaker replica
want=""
for t in $TENANTS; do
    read -r s1 s2 <<<"$("$FERRY_BIN" place --slices <(printf '%s\t0\t1000\n' "$t") \
        --shards <(printf 'node1\t1\nnode2\t1\nnode3\t1\n') --rf 2 --json |
        jq -r '.placements[0].shards | join(" ")')"
    case " $s1 $s2 " in
    *" node3 "*)
        # the old replica that is not among the two best goes
        for o in node1 node2; do
            [ "$o" = "$s1" ] || [ "$o" = "$s2" ] || want+="move $t 0 $o node3"$'\n'
        done
        ;;
    esac
done
want=$(printf '%s' "$want" | grep . | sort || true)
[ -n "$want" ] || fail "no tenant ranks node3 among its two best shards: the test needs one"
assert_eq "$want" "$steps" "the plan moves exactly the replicas node3 outranks"
ok "shard add node3: the plan moves $(wc -l <<<"$want") replica(s) to node3, the weaker one of each slice that ranks node3 among its best two"

"$FERRY_BIN" rebalance --config "$C" --grace 0 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "rebalance failed: $(tail -5 "$T/rb.err")"
S=$(jq -c 'select(.event == "summary")' "$T/rb.json")
assert_eq "$(wc -l <<<"$want")" "$(jq .moves <<<"$S")" "every planned move done"
assert_eq 0 "$(jq .failed <<<"$S")" "no move failed"
declare -A URL=([node1]=$U1 [node2]=$U2 [node3]=$U3)
for t in $TENANTS; do
    r=$(route_of "$t")
    IFS=, read -r -a RS <<<"$r"
    assert_eq 2 "${#RS[@]}" "$t: 2 replicas ($r)"
    for n in node1 node2 node3; do
        if [[ ",$r," == *",$n,"* ]]; then
            assert_eq "${FP[$t]}" "$(mv_fp "${URL[$n]}" "$t" 0)" "$t on $n: the rows it had"
        else
            assert_eq 0 "$(chq "${URL[$n]}" "SELECT count() FROM events WHERE tenant = '$t'")" "$t: nothing left on $n"
        fi
    done
done
mv_no_residue "$L"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan2.json"
assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan2.json")" "balanced: nothing left to move"
assert_eq active "$("$FERRY_BIN" catalog export --config "$C" | jq -r '.shards[] | select(.name == "node3") | .state')" "node3 active after its first rebalance"
ok "every slice has 2 replicas with its rows, nothing left where a replica moved from, node3 active"
done_testing
