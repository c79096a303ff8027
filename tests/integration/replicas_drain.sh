# Replicas across zones in a 4-node lab (node1, node2 in zone a; node3, node4 in zone b), two
# tenants with rf = 2 and a cold day each:
#  1. with zone b drained, raising rf clones both tenants onto node2: replicas share zone a;
#  2. zone b back (ferry shard add): the rebalance plans zone repair, one MOVE per tenant from
#     zone a to zone b, and after it every slice has 2 replicas in distinct zones with identical
#     data (per-partition fingerprints);
#  3. draining the zone-b shard that holds acme's replica: the rebalance MOVEs that replica (and
#     only that one) to the other zone-b shard, data identical, nothing left on the drained shard,
#     and `ferry route` says so; the drained shard can then be removed;
#  4. `ferry move --from` a shard the slice is not on: exit 2.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
lab_up "$L" --nodes 4
mv_conf "$L"
sed -i -e '/^\[shard "node1"\]/a zone = a' -e '/^\[shard "node2"\]/a zone = a' \
    -e '/^\[shard "node3"\]/a zone = b' -e '/^\[shard "node4"\]/a zone = b' "$L/mv.conf"
C="$L/mv.conf"
for u in $(mv_urls "$L"); do chq "$u" "$MV_DDL" >/dev/null; done
"$FERRY_BIN" init --config "$C" >/dev/null || fail "ferry init failed"
declare -A U ZONE=([node1]=a [node2]=a [node3]=b [node4]=b)
for n in node1 node2 node3 node4; do U[$n]=$(lab_url "$L" "$n"); done
mv_ingest "${U[node1]}" acme 0 3 40000
mv_ingest "${U[node1]}" beta 0 3 30000 5
for t in acme beta; do
    chq "${U[node1]}" "ALTER TABLE events MOVE PARTITION ('$t', 20261101, 0) TO DISK 'cold'" >/dev/null
done
fp_acme=$(mv_fp "${U[node1]}" acme 0); fp_beta=$(mv_fp "${U[node1]}" beta 0)
[ -n "$fp_acme" ] && [ -n "$fp_beta" ] || fail "no data ingested"

route_of() { "$FERRY_BIN" route --config "$C" --tenant "$1" --json | jq -r '.slices[0].shards | join(",")'; }
# every replica of tenant $1 holds the fingerprints $2 and its route has 2 shards in 2 zones
check_replicas() {
    local t=$1 fp=$2 r n
    r=$(route_of "$t")
    IFS=, read -r -a RS <<<"$r"
    assert_eq 2 "${#RS[@]}" "$t: 2 replicas ($r)"
    [ "${ZONE[${RS[0]}]}" != "${ZONE[${RS[1]}]}" ] || fail "$t: both replicas in zone ${ZONE[${RS[0]}]} ($r)"
    for n in "${RS[@]}"; do assert_eq "$fp" "$(mv_fp "${U[$n]}" "$t" 0)" "$t on $n: identical per-partition fingerprints"; done
}

# ---- 1. replicas in one zone -------------------------------------------------------------------
"$FERRY_BIN" shard drain node3 --config "$C" >/dev/null || fail "drain node3 failed"
"$FERRY_BIN" shard drain node4 --config "$C" >/dev/null || fail "drain node4 failed"
"$FERRY_BIN" tenant set-rf acme 2 --config "$C" >/dev/null || fail "set-rf acme failed"
"$FERRY_BIN" tenant set-rf beta 2 --config "$C" >/dev/null || fail "set-rf beta failed"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb1.json" 2>"$T/rb1.err" || fail "rebalance (clone) failed: $(tail -5 "$T/rb1.err")"
assert_eq "clone clone" "$(jq -r 'select(.event == "plan") | [.moves[].kind] | join(" ")' "$T/rb1.json")" "two clones planned"
for t in acme beta; do
    assert_eq "node1,node2" "$(route_of $t)" "$t: cloned to node2 (zone b drained: the zone rule has nowhere else)"
    assert_eq "$(mv_fp "${U[node1]}" $t 0)" "$(mv_fp "${U[node2]}" $t 0)" "$t: clone identical"
done
ok "rf 2 with zone b drained: both tenants on node1 and node2 (zone a only)"

# ---- 2. zone repair ----------------------------------------------------------------------------
"$FERRY_BIN" shard add node3 --config "$C" >/dev/null || fail "add node3 failed"
"$FERRY_BIN" shard add node4 --config "$C" --json >"$T/add.json" || fail "add node4 failed"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan2.json" || fail "plan failed"
P=$(jq -c 'select(.event == "plan")' "$T/plan2.json")
assert_eq 2 "$(jq '.moves | length' <<<"$P")" "two steps planned"
for t in acme beta; do
    M=$(jq -c --arg t "$t" '.moves[] | select(.tenant == $t)' <<<"$P")
    assert_eq move "$(jq -r .kind <<<"$M")" "$t: zone repair is a move"
    assert_eq a "${ZONE[$(jq -r .from <<<"$M")]}" "$t: moves a replica out of zone a"
    assert_eq b "${ZONE[$(jq -r .to <<<"$M")]}" "$t: into zone b"
done
assert_eq "node1,node2" "$(route_of acme)" "dry run changed nothing"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb2.json" 2>"$T/rb2.err" || fail "rebalance (zone repair) failed: $(tail -5 "$T/rb2.err")"
assert_eq "DONE DONE" "$(jq -r 'select(.event == "move") | .state' "$T/rb2.json" | tr '\n' ' ' | sed 's/ $//')" "both moves done"
check_replicas acme "$fp_acme"
check_replicas beta "$fp_beta"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan3.json" || fail "plan failed"
assert_eq 0 "$(jq 'select(.event == "plan") | .moves | length' "$T/plan3.json")" "nothing left to plan"
ok "zone repair: one replica of each tenant moved to zone b, data identical, plan empty after"

# ---- 3. draining a shard that holds a replica ---------------------------------------------------
IFS=, read -r -a RA <<<"$(route_of acme)"
D=${RA[0]}; [ "${ZONE[$D]}" = b ] || D=${RA[1]}
KEEP=${RA[0]}; [ "$KEEP" = "$D" ] && KEEP=${RA[1]}
OTHER=node3; [ "$D" = node3 ] && OTHER=node4
beta_before=$(route_of beta)
"$FERRY_BIN" shard drain "$D" --config "$C" --json >"$T/drain.json" || fail "drain $D failed"
P=$(jq -c . "$T/drain.json")
M=$(jq -c '.moves[] | select(.tenant == "acme")' <<<"$P")
assert_eq "move $D $OTHER" "$(jq -r '"\(.kind) \(.from) \(.to)"' <<<"$M")" "acme: its replica on $D moves to $OTHER (zone b; $KEEP stays)"
nb=0; [[ ",$beta_before," == *",$D,"* ]] && nb=1
assert_eq $((1 + nb)) "$(jq '.moves | length' <<<"$P")" "only replicas on $D move"
"$FERRY_BIN" rebalance --config "$C" --grace 300 --json >"$T/rb3.json" 2>"$T/rb3.err" || fail "rebalance (drain) failed: $(tail -5 "$T/rb3.err")"
R=$(jq -c 'select(.event == "move" and .tenant == "acme")' "$T/rb3.json")
assert_eq "DONE $D $OTHER" "$(jq -r '"\(.state) \(.from) \(.to)"' <<<"$R")" "acme's move done"
r=$(route_of acme)
[[ ",$r," == *",$KEEP,"* && ",$r," == *",$OTHER,"* ]] || fail "acme's route is $r, expected $KEEP and $OTHER"
check_replicas acme "$fp_acme"
check_replicas beta "$fp_beta"
assert_eq 0 "$(chq "${U[$D]}" "SELECT count() FROM events")" "nothing left on the drained $D"
assert_eq 0 "$(jq 'select(.event == "plan") | .moves | length' <(
    "$FERRY_BIN" rebalance --config "$C" --dry-run --json))" "nothing left to plan"
"$FERRY_BIN" shard remove "$D" --config "$C" >/dev/null || fail "remove $D refused after the drain"
mv_no_residue "$L"
ok "drain: acme's replica moved $D -> $OTHER, $KEEP kept, data identical, $D empty and removed"

# ---- bad input: moving a replica the slice does not have ----------------------------------------
for n in node1 node2 node3 node4; do
    [ "$n" != "$D" ] && [ "$n" != "$KEEP" ] && [ "$n" != "$OTHER" ] && FREE=$n
done
expect_exit 2 "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --from "$D" --to "$FREE"
assert_contains "$ERR" "is not served by $D" "move --from a shard the slice is not on"
assert_eq "" "$OUT" "nothing on stdout"
r2=$(route_of acme)
assert_eq "$r" "$r2" "route unchanged"
ok "bad input refused with exit 2"
done_testing
