# A client's retry across a move (issue 16, docs/routing.md "Retries and moves"): one batch with
# rows of tenant a (on node1) and tenant b (on node2) fails because node2 is down: a's rows are
# stored on node1, b's are not. A move of a's slice to node3 then waits before its routing switch
# while the router expects the client's retry ([router] retry_window); the client retries once
# node2 is back, node1 drops a's rows as a duplicate, node2 stores b's; only then does the move
# switch. Every row once. Without the wait (retry_window = 0) the same sequence stores a's rows
# twice: the retry reaches node3, which never saw them, while the move carried the first
# attempt's copy there too - what the wait prevents.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"

L=$T/lab
lab_up "$L" --nodes 3
declare -A U
for n in node1 node2 node3; do U[$n]=$(lab_url "$L" $n); done
events_table "${U[@]}"

# run WINDOW TAG: one scenario on a fresh catalog; sets STORED_A / STORED_B (rows of a and b)
run() {
    local window=$1 tag=$2
    # two tenants, one on node1 and one on node2, and a router
    retry_scenario "$L" "$tag" "$window" "${U[node1]}"
    local C=$RS_CONF a=$TA b=$TB R=$R_URL RPID=$R_PID
    # the batch: 100 rows of a, 100 of b, ids unique per scenario
    python3 -c "
import sys
a, b, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(200):
    print('%s\t20261201\t%d\t%d\tv' % (a if i % 2 == 0 else b, i, base + i))" "$a" "$b" 1000 >"$T/batch.tsv"
    local Q="INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV"
    send() { curl -s -o "$T/resp" -w '%{http_code}' "$R/?query_id=batch-$tag&query=$(jq -rn --arg q "$Q" '$q|@uri')" --data-binary @"$T/batch.tsv"; }
    # node2 down: the batch fails after a's rows were stored on node1
    local P2
    P2=$(lab_pid "$L" node2)
    kill -KILL "$P2"
    wait_for 30 bash -c "! kill -0 $P2 2>/dev/null"
    local code
    code=$(send)
    [ "$code" -ge 500 ] || fail "$tag: the batch with node2 down answered $code: $(cat "$T/resp")"
    assert_contains "$(cat "$T/resp")" "written only in part" "$tag: partial write reported"
    assert_eq 100 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = '$a'")" "$tag: a's rows on node1"
    # the move of a's slice to node3
    "$FERRY_BIN" move --tenant "$a" --split 0 --to node3 --grace 300 --json --config "$C" \
        >"$T/move-$tag.json" 2>"$T/move-$tag.log" &
    local MV=$!
    if [ "$window" != 0 ]; then
        # it holds before the switch while the router expects the retry
        wait_for 60 grep -q "waiting for a client's retry" "$T/move-$tag.log" ||
            fail "$tag: the move did not wait for the retry: $(tail -3 "$T/move-$tag.log")"
        assert_eq "node1" "$("$FERRY_BIN" route --tenant "$a" --json --config "$C" | jq -r '.slices[0].shards[0]')" \
            "$tag: a still routed to node1 while the retry is pending"
        lab_up "$L" >/dev/null
        code=$(send)
        assert_eq 200 "$code" "$tag: the retry once node2 is back ($(cat "$T/resp"))"
        wait "$MV" || fail "$tag: move failed: $(tail -5 "$T/move-$tag.log")"
    else
        wait "$MV" || fail "$tag: move failed: $(tail -5 "$T/move-$tag.log")"
        lab_up "$L" >/dev/null
        code=$(send)
        assert_eq 200 "$code" "$tag: the retry once node2 is back ($(cat "$T/resp"))"
    fi
    assert_eq "DONE" "$(jq -r 'select(.event == "move") | .state' "$T/move-$tag.json")" "$tag: move done"
    assert_eq "node3" "$("$FERRY_BIN" route --tenant "$a" --json --config "$C" | jq -r '.slices[0].shards[0]')" "$tag: a on node3"
    STORED_A=0 STORED_B=0
    for n in node1 node2 node3; do
        STORED_A=$((STORED_A + $(chq "${U[$n]}" "SELECT count() FROM events WHERE tenant = '$a'")))
        STORED_B=$((STORED_B + $(chq "${U[$n]}" "SELECT count() FROM events WHERE tenant = '$b'")))
    done
    stop_router "$RPID"
}

run 10s held
assert_eq "100 100" "$STORED_A $STORED_B" "with the wait: every row of the batch once"
ok "a move waits for the client's retry of a failed batch; the retry is deduplicated where the first attempt's rows are; every row once"

run 0 nowait
assert_eq "200 100" "$STORED_A $STORED_B" "without the wait, the moved tenant's rows twice"
ok "without the wait (retry_window = 0) the retry after the move stores the moved slice's rows twice: the wait is what makes it exact"
done_testing
