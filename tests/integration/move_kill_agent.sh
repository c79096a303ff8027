# kill -9 of the node agent alone (a `ferry agent` daemon beside a lab node whose ClickHouse keeps
# running) in the middle of a move: on the target while it receives a part, then on the source
# while it sends one. The mover stops cleanly in CLONE; with the agent down a resume stops the
# same way; after the agent is started again the resume finishes the move: identical data,
# nothing duplicated, the half-received folder of the dead agent removed, no residue.
source "$FERRY_SOURCE_DIR/tests/lib/harness.sh"
source "$FERRY_SOURCE_DIR/tests/lib/lab.sh"
source "$FERRY_SOURCE_DIR/tests/lib/move.sh"

export FERRY_AGENT_TEST_SLOW_RECEIVE_MS=100 # every receiving agent pauses after each file
L=$T/lab
lab_up "$L" --nodes 2
U1=$(lab_url "$L" node1); U2=$(lab_url "$L" node2)
for u in "$U1" "$U2"; do chq "$u" "$MV_DDL" >/dev/null; done
AP=$(free_port)
mv_conf "$L"
# node2's agent is a separate daemon: the catalog learns its URL from the config at init
sed -i "/^\[shard \"node2\"\]/,/^\[/ s|^agent = .*|agent = http://127.0.0.1:$AP|" "$L/mv.conf"
grep -q "agent = http://127.0.0.1:$AP" "$L/mv.conf" || fail "config not rewritten: $(cat "$L/mv.conf")"
"$FERRY_BIN" init --config "$L/mv.conf" >/dev/null || fail "ferry init failed"
C=$L/mv.conf
start_agent() {
    bg_start "$T/agent$1.log" "$FERRY_BIN" agent --clickhouse "$U2" \
        --data-path "$L/node2/data/" --listen "127.0.0.1:$AP" --token-file "$L/node2/agent.token" --config "$C"
    APID=$BG_PID
    wait_for 30 grep -q "agent ready" "$T/agent$1.log" || fail "agent did not start: $(cat "$T/agent$1.log")"
}
start_agent 1
mv_ingest "$U1" acme 0 4 20000
for d in 1 2; do chq "$U1" "ALTER TABLE events MOVE PARTITION ('acme', 2026110$d, 0) TO DISK 'cold'" >/dev/null; done
want=$(mv_fp "$U1" acme 0)
"$FERRY_BIN" rebalance --config "$C" --dry-run >/dev/null
unfinished() { sqlite3 "$L/catalog.db" "SELECT name FROM records WHERE parent = 'moves' AND json_extract(doc, '\$.state') NOT IN ('DONE', 'FAILED')"; }

# kill_agent_case TO WHERE_THE_PART_ARRIVES N
kill_agent_case() {
    local to=$1 recv=$2 n=$3 from
    [ "$to" = node2 ] && from=node1 || from=node2
    "$FERRY_BIN" move --config "$C" --tenant acme --split 0 --to "$to" --grace 200 >"$T/m.out" 2>"$T/m.err" &
    local mpid=$!
    wait_for 120 sh -c "find '$L/$recv/data/store' -path '*/detached/tmp-ferry-*' 2>/dev/null | grep -q ." ||
        fail "no part was being received on $recv: $(cat "$T/m.err")"
    kill -KILL "$APID"
    local rc=0
    wait "$mpid" || rc=$?
    assert_eq 1 "$rc" "mover exit status after kill -9 of node2's agent"
    assert_contains "$(cat "$T/m.err")" "stopped in CLONE (resume: ferry move --resume" "clean stop"
    assert_contains "$(cat "$T/m.err")" "from $from to $to:" "names both sides of the failed send"
    local id; id=$(unfinished)
    [ -n "$id" ] || fail "no unfinished move"
    assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' "$U2/ping")" "node2's ClickHouse still up"
    expect_exit 1 "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200
    assert_contains "$ERR" "stopped in CLONE" "resume with the agent down stops cleanly"
    start_agent "$n"
    "$FERRY_BIN" move --config "$C" --resume "$id" --grace 200 >"$T/r.out" 2>"$T/r.err" ||
        fail "resume failed: $(cat "$T/r.err")"
    local du su
    [ "$to" = node2 ] && { du=$U2; su=$U1; } || { du=$U1; su=$U2; }
    assert_eq "$want" "$(mv_fp "$du" acme 0)" "data identical on $to"
    assert_eq 80000 "$(chq "$du" "SELECT count() FROM events WHERE tenant = 'acme'")" "no row duplicated"
    assert_eq 0 "$(chq "$su" "SELECT count() FROM events WHERE tenant = 'acme'")" "$from holds nothing of acme"
    assert_eq "$to" "$("$FERRY_BIN" route --config "$C" --tenant acme --split 0 --json | jq -r '.slices[0].shards[0]')" "route"
    left=$(find "$L"/node*/data -path '*/detached/tmp-ferry-*' 2>/dev/null || true)
    [ -z "$left" ] || fail "half-received folders left: $left"
    mv_no_residue "$L"
    ok "kill -9 of node2's agent ($([ "$to" = node2 ] && echo target, receiving || echo source, sending)): stopped in CLONE, resumed after restart: identical, no residue"
}
kill_agent_case node2 node2 2
grep -q 'removed a half-received part left by a killed agent' "$T/r.err" || fail "the dead agent's folder was not removed by the move: $(cat "$T/r.err")"
kill_agent_case node1 node1 3
done_testing
