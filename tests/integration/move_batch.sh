# Batches of moves (ferry rebalance --batch N, docs/moves.md "Batches"): 16 one-split tenants with
# a cold and two hot days are rebalanced back and forth between 3 nodes, the moves between each
# pair of shards run as batches. Each run is killed with kill -9 in the middle of a batch (a
# test-only crash point: parts sent and not attached, one partition published, the source's
# partitions detached), then `ferry rebalance` again finishes the cut moves one by one and the
# rest in batches: every tenant's rows and fingerprint through ClickHouse are what was ingested,
# no row twice, each slice only on its routed shard, staging empty, no leftover folder.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

L=$T/lab
mv_setup "$L" 3
C="$L/mv.conf"
declare -A URL
for n in node1 node2 node3; do URL[$n]=$(lab_url "$L" $n); done
for i in $(seq -w 1 16); do mv_ingest "${URL[node1]}" "b$i" 0 3 $((300 + 10#$i * 40)) "$i"; done
chq "${URL[node1]}" "SELECT DISTINCT partition FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%20261101%'" |
    while read -r p; do chq "${URL[node1]}" "ALTER TABLE events MOVE PARTITION $(sed "s/\\\\'/'/g" <<<"$p") TO DISK 'cold'" >/dev/null; done
# per tenant and node: rows, sum and xor of the rows' hashes (a tenant on two nodes, or a row
# twice, changes the list)
tenant_fps() {
    local n
    for n in node1 node2 node3; do
        chq "${URL[$n]}" "SELECT tenant, count(), sum(cityHash64(*)), groupBitXor(cityHash64(*)) FROM events GROUP BY tenant"
        echo
    done | grep . | sort
}
want=$(tenant_fps)
assert_eq 16 "$(wc -l <<<"$want")" "16 tenants ingested"
"$FERRY_BIN" rebalance --config "$C" --dry-run --json >/dev/null || fail "inventory sync failed"

check() { # what every run must leave
    local what=$1 n t r
    assert_eq "$want" "$(tenant_fps)" "$what: every tenant's rows and fingerprint as ingested"
    for n in node1 node2 node3; do
        assert_eq 0 "$(chq "${URL[$n]}" "SELECT count() FROM system.parts WHERE active AND rows > 0 AND table = 'events_ferry_staging'")" "$what: staging on $n empty"
        chq "${URL[$n]}" "SELECT DISTINCT tenant FROM events" | while read -r t; do
            r=$("$FERRY_BIN" route --config "$C" --tenant "$t" --split 0 --json | jq -r '.slices[0].shards | join(",")')
            [ "$r" = "$n" ] || fail "$what: $t has rows on $n but is routed to $r"
        done
    done
    assert_eq 0 "$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")" "$what: no unfinished move"
    mv_no_residue "$L"
}

# one run without a crash: drain node1, its 16 slices go to node2 and node3 in batches of 4
"$FERRY_BIN" shard drain node1 --config "$C" --json >"$T/drain.json" || fail "drain failed"
"$FERRY_BIN" rebalance --config "$C" --batch 4 --max-parallel 2 --grace 100 --json >"$T/rb.json" 2>"$T/rb.err" ||
    fail "batched rebalance failed: $(tail -5 "$T/rb.err")"
S=$(jq -c 'select(.event == "summary")' "$T/rb.json")
assert_eq 16 "$(jq .moves <<<"$S")" "16 moves done"
assert_eq 0 "$(jq .failed <<<"$S")" "no move failed"
[ "$(grep -c 'move batch started' "$T/rb.err")" -ge 2 ] || fail "the moves did not run as batches: $(grep -c 'move batch started' "$T/rb.err")"
assert_eq 0 "$(chq "${URL[node1]}" "SELECT count() FROM events")" "node1 empty"
# the hot partitions leave node1 by REPLACE from the empty twin (its cold ones, moved to the
# cold disk by ClickHouse, by DETACH), and the staged cold ones enter the targets by ATTACH FROM
grep -q 'source partitions released.*by_replace=[1-9]' "$T/rb.err" ||
    fail "no batch released its source by REPLACE: $(grep 'partitions released' "$T/rb.err" | head -3)"
grep -q 'move: published.*by_attach=[1-9]' "$T/rb.err" ||
    fail "no batch published by ATTACH FROM staging: $(grep 'move: published' "$T/rb.err" | head -3)"
check "batched drain"
# each journal write of a batch (a state, an attempt, a freeze name, the part records) is one
# catalog commit for all its members, so a batch commits no more than one move alone (10 or 11
# with one table), not that once per member (the batch's commits count on its first member)
batches=$(grep -c 'move batch started' "$T/rb.err")
alone=16
for m in $(grep -o 'move batch started.* moves=[0-9]*' "$T/rb.err" | sed 's/.*moves=//'); do alone=$((alone - m)); done
commits=$(jq -s '[.[] | select(.event == "move") | .catalog_writes] | add' "$T/rb.json")
echo "# batched drain: $commits catalog commits for 16 moves in $batches batches ($alone alone)"
[ "$commits" -le $(((batches + alone) * 11)) ] ||
    fail "$commits catalog commits for 16 moves in $batches batches and $alone alone: more than 11 each"
ok "drain of node1: 16 moves in $batches batches, $commits catalog commits, data identical, no residue"

# kill -9 in the middle of a batch, then resume with ferry rebalance
run=0
for step in "add node1" "drain node2" "add node2" "drain node3"; do
    point=$(case $run in 0) echo CLONE:sent;; 1) echo SWITCH:published-one;; 2) echo CLEANUP:detached;; *) echo SWITCH:caught-up;; esac)
    run=$((run + 1))
    "$FERRY_BIN" shard $step --config "$C" --json >"$T/step.json" || fail "shard $step failed"
    [ "$(jq .moved "$T/step.json")" -gt 1 ] || fail "shard $step plans fewer than 2 moves"
    FERRY_TEST_CRASH_AFTER=$point expect_exit 137 "$FERRY_BIN" rebalance --config "$C" --batch 8 \
        --max-parallel 1 --max-per-shard 2 --grace 100
    assert_contains "$ERR" "test crash point reached" "crashed at $point"
    assert_contains "$ERR" "move batch started" "the crashed run was a batch ($point)"
    cut=$(sqlite3 "$L/catalog.db" "SELECT count() FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')")
    [ "$cut" -ge 2 ] || fail "fewer than 2 moves cut by the crash at $point: $cut"
    "$FERRY_BIN" rebalance --config "$C" --batch 8 --max-parallel 2 --grace 100 --json >"$T/rb.json" 2>"$T/rb.err" ||
        fail "rebalance after the crash at $point failed: $(tail -5 "$T/rb.err")"
    assert_eq 0 "$(jq -c 'select(.event == "summary") | .failed' "$T/rb.json")" "no move failed after $point"
    check "after a kill -9 at $point"
    "$FERRY_BIN" rebalance --config "$C" --dry-run --json >"$T/plan.json"
    assert_eq 0 "$(jq -r 'select(.event == "plan") | .moved' "$T/plan.json")" "nothing left to move after $point"
    ok "shard $step, kill -9 at $point with $cut moves of a batch cut: resumed, identical, nothing twice, no residue"
done
for n in node1 node2 node3; do assert_eq 0 "$(curl -s "${URL[$n]}/ferry/status" | jq .refused_deletes)" "no delete attempted on $n"; done
done_testing
