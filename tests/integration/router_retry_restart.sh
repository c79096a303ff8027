# A router killed and restarted between a client's failed write and its retry ([router]
# retry_journal; docs/routing.md "Retries and moves"). The slices a client may retry live in the
# router's memory: tiering, moves and repairs ask the routers before they take a partition's block
# ids out of ClickHouse's deduplication log. A router killed -9 and started again must still hold
# them, or the retry after a tiering swap stores the rows twice.
#
# 1. journal: one batch with rows of tenant a (node1) and b (node2) fails (node2 down) after a's
#    rows were stored on node1; the router is killed -9 (tiering is held back while it is down)
#    and started again on its port; tiering of a's day on node1 is held back by the restarted
#    router; the retry once node2 is back is
#    deduplicated: every row once.
# 2. no journal: the same sequence; the restarted router has forgotten the failure, tiering swaps
#    the partition and the retry stores a's rows a second time (what the journal prevents).
# 3. in flight: a request whose rows of a were routed but which has not ended: tiering of a's day
#    waits for it (its rows may be in the frozen parts and it may still fail); the router is then
#    killed mid-body (the client never got an answer): the restarted router holds a's slice, not
#    b's.
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
Q="INSERT INTO events (tenant, day, uid, id, v) FORMAT TSV"

# kill_router TAG: kill -9 the router (R_PID); start_again CONF TAG: start it on its port
kill_router() {
    kill -KILL "$R_PID"
    wait_for 30 bash -c "! kill -0 $R_PID 2>/dev/null" || fail "$1: the router outlived kill -9"
}
restart_router() { kill_router "$2"; start_again "$@"; }
start_again() {
    local conf=$1 tag=$2 port=${R_URL##*:}
    bg_start "$T/router-$tag-2.log" "$FERRY_BIN" router --config "$conf" --listen "127.0.0.1:$port"
    R_PID=$BG_PID
    wait_for 60 curl -sf "$R_URL/ping" || fail "$tag: the restarted router does not answer: $(tail -5 "$T/router-$tag-2.log")"
}

# pending_ms TENANT: how long the router still expects a client's retry to TENANT/0
pending_ms() { curl -sf "$R_URL/ferry/router?tenant=$1&split=0" | jq -r '.pending_retry_ms // 0'; }

# restart_case TAG JOURNAL(1|0): cases 1 and 2; sets STORED_A / STORED_B
restart_case() {
    local tag=$1 journal=$2 code lines=()
    for n in node1 node2; do chq "${U[$n]}" "DROP TABLE IF EXISTS events SYNC" >/dev/null; done
    events_table --tiered "${U[@]}"
    [ "$journal" = 0 ] || lines=("retry_journal = $T/$tag.retries")
    retry_scenario "$L" "$tag" 60s "${U[node1]}" "${lines[@]}"
    local C=$RS_CONF a=$TA b=$TB
    python3 -c "
import sys
a, b, day = sys.argv[1], sys.argv[2], sys.argv[3]
for i in range(200):
    print('%s\t%s\t%d\t%d\tv' % (a if i % 2 == 0 else b, day, i, 1000 + i))" "$a" "$b" "$DAY" >"$T/batch-$tag.tsv"
    send() { curl -s -o "$T/resp" -w '%{http_code}' "$R_URL/?query_id=batch-$tag&query=$(jq -rn --arg q "$Q" '$q|@uri')" --data-binary @"$T/batch-$tag.tsv"; }
    cold_a() { chq "${U[node1]}" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$a''%' AND disk_name = 'cold'"; }
    local P2
    P2=$(lab_pid "$L" node2)
    kill -KILL "$P2"
    wait_for 30 bash -c "! kill -0 $P2 2>/dev/null"
    code=$(send)
    [ "$code" -ge 500 ] || fail "$tag: the batch with node2 down answered $code: $(cat "$T/resp")"
    assert_eq 100 "$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = '$a'")" "$tag: a's rows on node1"
    [ "$(pending_ms "$a")" -gt 0 ] || fail "$tag: the router does not expect the retry before its restart: $(curl -s "$R_URL/ferry/router?tenant=$a&split=0")"
    kill_router "$tag"
    if [ "$journal" = 1 ]; then
        # while the router is down: it may hold the retry once back, so nothing is swapped
        "$FERRY_BIN" tier --older-than 3d --tenant "$a" --json --config "$C" >"$T/tier0-$tag.json" 2>"$T/tier0-$tag.log" || true
        assert_contains "$(cat "$T/tier0-$tag.log" "$T/tier0-$tag.json")" "does not answer" \
            "$tag: a router that is down holds the swap back"
        assert_eq 0 "$(cold_a)" "$tag: a's day hot while the router is down"
    fi
    start_again "$C" "$tag"
    local left
    left=$(pending_ms "$a")
    # node2 is down: its jobs fail, which is not what this test looks at
    "$FERRY_BIN" tier --older-than 3d --tenant "$a" --json --config "$C" >"$T/tier-$tag.json" 2>"$T/tier-$tag.log" || true
    if [ "$journal" = 1 ]; then
        [ "$left" -gt 0 ] && [ "$left" -le 60000 ] ||
            fail "$tag: the restarted router does not expect the retry (pending_retry_ms $left): $(cat "$T/router-$tag-2.log")"
        assert_contains "$(cat "$T/tier-$tag.log" "$T/tier-$tag.json")" "held back" \
            "$tag: the restarted router holds the swap back"
        assert_eq 0 "$(cold_a)" "$tag: a's day still hot on node1"
        assert_contains "$(cat "$T/router-$tag-2.log")" "retry journal replayed" "$tag: the replay is logged"
    else
        assert_eq 0 "$left" "$tag: without a journal the restarted router expects nothing"
        [ "$(cold_a)" -gt 0 ] || fail "$tag: a's day not tiered: $(cat "$T/tier-$tag.json") $(tail -5 "$T/tier-$tag.log")"
    fi
    lab_up "$L" >/dev/null
    code=$(send)
    assert_eq 200 "$code" "$tag: the retry once node2 is back ($(cat "$T/resp"))"
    STORED_A=$(chq "${U[node1]}" "SELECT count() FROM events WHERE tenant = '$a'")
    STORED_B=$(chq "${U[node2]}" "SELECT count() FROM events WHERE tenant = '$b'")
    stop_router "$R_PID"
}

restart_case journal 1
assert_eq "100 100" "$STORED_A $STORED_B" "with the journal: every row of the batch once"
ok "a router killed -9 after a failed write still holds the slices on restart (retry_journal): the swap waits, the retry is deduplicated, every row once"

restart_case nojournal 0
assert_eq "200 100" "$STORED_A $STORED_B" "without the journal, the tiered tenant's rows twice"
ok "without a journal the restarted router forgets the failure: the swap goes ahead and the retry stores the rows twice (what the journal prevents)"

# 3. a request killed in flight: the router routed a's rows, then died before any answer
retry_scenario "$L" inflight 60s "${U[node1]}" "retry_journal = $T/inflight.retries"
C=$RS_CONF
# a's day holds rows to tier (a write that ended: 200)
for i in $(seq 1 10); do printf '%s\t%s\t%d\t%d\tv\n' "$TA" "$DAY" "$i" "$((5000 + i))"; done >"$T/done.tsv"
code=$(curl -s -o "$T/resp" -w '%{http_code}' "$R_URL/?query_id=done-1&query=$(jq -rn --arg q "$Q" '$q|@uri')" --data-binary @"$T/done.tsv")
assert_eq 200 "$code" "inflight: a's earlier rows ($(cat "$T/resp"))"
printf '%s\t%s\t1\t1\tv\n' "$TA" "$DAY" >"$T/inflight.tsv"
hold_write_open "$R_URL" "$Q" "$T/inflight.tsv"
CLIENT=$HOLD_PID
wait_for 30 grep -q "^I [0-9]* 0 $TA\$" "$T/inflight.retries" ||
    fail "the router did not journal the in-flight request's slice: $(cat "$T/inflight.retries")"
open_ms() { curl -sf "$R_URL/ferry/router?tenant=$1&split=0" | jq -r '.inflight_write_ms // 0'; }
[ "$(open_ms "$TA")" -gt 0 ] || fail "the router does not report the open write to $TA/0: $(curl -s "$R_URL/ferry/router?tenant=$TA&split=0")"
assert_eq 0 "$(open_ms "$TB")" "no open write to $TB/0"
# tiering freezes a's day after the open write's first row: the write may still fail and be
# retried, and its rows could be among the frozen parts, so the swap waits
"$FERRY_BIN" tier --older-than 3d --tenant "$TA" --json --config "$C" >"$T/tier-open.json" 2>"$T/tier-open.log" || true
assert_contains "$(cat "$T/tier-open.log" "$T/tier-open.json")" "open for" \
    "a write open since before the freeze holds the swap back"
assert_eq 0 "$(chq "${U[node1]}" "SELECT count() FROM system.parts WHERE active AND table = 'events' AND partition LIKE '%''$TA''%' AND disk_name = 'cold'")" \
    "$TA's day still hot while the write is open"
ok "a tiering swap waits for a write that has been open since before its freeze"
restart_router "$C" inflight
kill "$CLIENT" 2>/dev/null || true
left=$(pending_ms "$TA")
[ "$left" -gt 50000 ] && [ "$left" -le 60000 ] ||
    fail "a request killed in flight: the restarted router should hold $TA/0 for a whole window, holds it $left ms: $(cat "$T/router-inflight-2.log")"
assert_eq 0 "$(pending_ms "$TB")" "a slice the killed request never routed is not held"
ok "a request the router was killed in the middle of: its slice held for a whole window on restart, no other slice"
stop_router "$R_PID"
done_testing
