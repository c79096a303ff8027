# Tiering and a client's retry (the SQLite soak at 0c4fb19, docs/reliability.md): one batch with
# rows of tenant a (on node1) and tenant b (on node2) fails because node2 is down, after a's rows
# were stored on node1. Tiering a's old day on node1 swaps its hot part for a cold copy (DETACH
# PART, ATTACH PARTITION FROM staging): ClickHouse then drops the detached part's block ids from
# the table's deduplication log, and the cold copy carries none, so the client's retry would store
# a's rows a second time. While the router expects that retry ([router] retry_window), the swap
# is held back (the job keeps its journal, the partition stays hot); the retry is deduplicated;
# the next run swaps. Every row once. Without the hold (retry_window = 0) the same sequence
# stores a's rows twice, which is what the hold prevents.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/events.sh"
source "$FERRY_SOURCE_DIR/tests/lib/router.sh"
source "$FERRY_SOURCE_DIR/tests/lib/tier.sh"

L=$T/lab
lab_up "$L" --nodes 2
declare -A U
for n in node1 node2; do U[$n]=$(lab_url "$L" $n); done
DAY=20261101 # a finished day: older than --older-than 3d

# run WINDOW TAG: one scenario on a fresh catalog and fresh tables; sets STORED_A / STORED_B
run() {
    local window=$1 tag=$2 code
    for n in node1 node2; do chq "${U[$n]}" "DROP TABLE IF EXISTS events SYNC" >/dev/null; done
    events_table --tiered "${U[@]}"
    retry_scenario "$L" "$tag" "$window" "${U[node1]}"
    local C=$RS_CONF a=$TA b=$TB R=$R_URL RPID=$R_PID
    python3 -c "
import sys
a, b, day = sys.argv[1], sys.argv[2], sys.argv[3]
for i in range(200):
    print('%s\t%s\t%d\t%d\tv' % (a if i % 2 == 0 else b, day, i, 1000 + i))" "$a" "$b" "$DAY" >"$T/batch.tsv"
    local Q="INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV"
    send() { curl -s -o "$T/resp" -w '%{http_code}' "$R/?query_id=batch-$tag&query=$(jq -rn --arg q "$Q" '$q|@uri')" --data-binary @"$T/batch.tsv"; }
    cold_a() { chq "${U[node1]}" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$a''%' AND disk_name = 'cold'"; }
    local P2
    P2=$(lab_pid "$L" node2)
    kill -KILL "$P2"
    wait_for 30 bash -c "! kill -0 $P2 2>/dev/null"
    code=$(send)
    [ "$code" -ge 500 ] || fail "$tag: the batch with node2 down answered $code: $(cat "$T/resp")"
    assert_eq 100 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = '$a'")" "$tag: a's rows on node1"
    # tiering of node1 (node2 is down: its jobs fail, which is not what this test looks at)
    "$FERRY_BIN" tier --older-than 3d --tenant "$a" --json --config "$C" >"$T/tier1-$tag.json" 2>"$T/tier1-$tag.log" || true
    if [ "$window" != 0 ]; then
        assert_contains "$(cat "$T/tier1-$tag.log" "$T/tier1-$tag.json")" "held back" \
            "$tag: the swap is held back while the retry is expected"
        assert_eq 0 "$(cold_a)" "$tag: a's day still hot on node1"
    else
        [ "$(cold_a)" -gt 0 ] || fail "$tag: a's day not tiered: $(cat "$T/tier1-$tag.json") $(tail -5 "$T/tier1-$tag.log")"
    fi
    lab_up "$L" >/dev/null
    code=$(send)
    assert_eq 200 "$code" "$tag: the retry once node2 is back ($(cat "$T/resp"))"
    if [ "$window" != 0 ]; then
        # the router keeps the slice on its list for the whole window (a success does not tell
        # it that every failed request came back): runs until then are held back again
        tier2() { "$FERRY_BIN" tier --older-than 3d --tenant "$a" --json --config "$C" >"$T/tier2-$tag.json" 2>"$T/tier2-$tag.log"; }
        wait_for 90 tier2 || fail "$tag: tier after the window: $(tail -5 "$T/tier2-$tag.log") $(cat "$T/tier2-$tag.json")"
        [ "$(cold_a)" -gt 0 ] || fail "$tag: a's day not tiered after the retry: $(cat "$T/tier2-$tag.json")"
        # the held-back job left nothing behind (freezes, detached or staged parts)
        tier_leftovers "$L" node1
        assert_eq 0 "$(chq "${U[node1]}" "SELECT count() FROM system.parts WHERE active AND table = 'events_ferry_staging'")" \
            "$tag: node1's staging table empty"
    fi
    STORED_A=$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = '$a'")
    STORED_B=$(chq "${U[node2]}" "SELECT count() FROM events WHERE tenant = '$b'")
    stop_router "$RPID"
}

run 20s held
assert_eq "100 100" "$STORED_A $STORED_B" "with the hold: every row of the batch once"
ok "tiering holds a swap back while a client's retry is expected; the retry is deduplicated, the next run tiers; every row once"

run 0 nowait
assert_eq "200 100" "$STORED_A $STORED_B" "without the hold, the tiered tenant's rows twice"
ok "without the hold (retry_window = 0) the retry after the swap stores the tiered rows twice: the hold is what makes it exact"
done_testing
